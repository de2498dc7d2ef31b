"""Grouped launches (option `grouping`, issue 16): the kernels of a GraphTurbo group run in
ONE Union1 launch instead of one each.

A group launch is a `__mlu_global__` function that calls its kernels, printed as
`__mlu_func__` functions, in order with `__sync_all()` between them: a kernel reads what
other cores wrote in the one before, and the barrier also completes the cores' asynchronous
copies and orders their GDRAM writes for the emulator's conflict check. Each kernel keeps its
work split and its use of the model's on-chip arenas (the barrier keeps one kernel's use
from overlapping the next's), so a launch costs its kernels' cycles plus one barrier
(`sync_all_cycles`) between two of them instead of one `launch_cycles` each. The arena reuses
bytes across the kernels of a launch as across launches (the barrier orders their writes).

With option `merge_launches` a launch is not bound to one group: consecutive kernels share
it whatever their groups (`merged_launches`). Intermediates go through GDRAM unless
residency.py (option `sram_residency`) keeps them in SRAM. Recurrence kernels (their own
printer) and kernels inside a static loop run alone.
"""
from __future__ import annotations

from ...config.recipe import option_on
from ..launches import Launch, alone, launch_entries as group_entries, plan_launches as plan_runs


def _shareable(dk):
    return dk.cls != "recurrence" and dk.kernel.loop is None


def plan_launches(program):
    """Launches covering the device kernels in order: consecutive shareable kernels of one group
    form one launch (backends/launches.py)."""
    return plan_runs(program.prefix, program.target_state.dev, program.grouping, _shareable)


def merged_launches(program, max_params):
    """Option `merge_launches` (with grouping on): every run of consecutive shareable kernels,
    whatever their groups, in one launch, cut where its pointer arguments would pass
    `max_params`. The kernels keep their own work split over all 16 tasks, so a launch
    boundary orders nothing a `__sync_all()` does not; it only costs the launch."""
    out, run, refs, parts = [], [], set(), {}
    grouping = program.grouping

    def flush():
        if len(run) > 1:       # named after its first kernel's group, as a group's launch is
            grp = grouping.group_of(run[0].name) if grouping is not None else None
            gid = grp.gid if grp is not None else -1
            n = parts[gid] = parts.get(gid, 0) + 1
            name = f"{program.prefix}_g{gid}" if gid >= 0 else f"{program.prefix}_l{len(out)}"
            out.append(Launch(name + (f"_{n}" if n > 1 else ""), tuple(dk.name for dk in run), gid))
        else:
            out.extend(alone(run))
        run.clear()
        refs.clear()

    for dk in program.target_state.dev:
        if not _shareable(dk):
            flush()
            out.extend(alone([dk]))
            continue
        mine = {ref for _, ref in dk.params}
        if run and len(refs | mine) > max_params:
            flush()
        run.append(dk)
        refs.update(mine)
    flush()
    return out


def group_launches(program, target, options):
    """Option `grouping`: the shareable kernels of each GraphTurbo group run in one launch;
    with option `merge_launches` too, consecutive shareable kernels run in one launch."""
    st = program.target_state
    if program.grouping is None:
        st.launches = None              # a launch per kernel
    elif option_on(options, "merge_launches"):
        st.launches = merged_launches(program, int(target.hardware["launch_max_pointer_args"]))
    else:
        st.launches = plan_launches(program)
    return program


def launches_of(program):
    """The launches the printer emits: the grouped ones, or one per kernel."""
    st = program.target_state
    return st.launches if st.launches is not None else alone(st.dev)


def launch_params(ln, by_name):
    """A launch's parameters: a lone kernel's own; a group's, its kernels' GDRAM references
    each once in order of first use, and per kernel the indices of the ones it takes."""
    if not ln.stitched:
        refs = [ref for _, ref in by_name[ln.name].params]
        return refs, [list(range(len(refs)))]
    refs, index, calls = [], {}, []
    for n in ln.kernels:
        ix = []
        for _, ref in by_name[n].params:
            if ref not in index:
                index[ref] = len(refs)
                refs.append(ref)
            ix.append(index[ref])
        calls.append(ix)
    return refs, calls


def launch_entries(entries, launches):
    """The plan's per-launch entries from its per-kernel ones: counts add up, on-chip use is
    the largest kernel's."""
    def merge(ln, ks):
        inst, copies = {}, {}
        for e in ks:
            for d, b in (e["copy_bytes"] or {}).items():
                copies[d] = copies.get(d, 0) + b
        why = [f"{e['name']}: {e['copy_bytes_unpredicted']}" for e in ks if e["copy_bytes"] is None]
        for e in ks:
            for name, c in e["static_instructions"].items():
                inst[name] = inst.get(name, 0) + c
        return {"class": "group", "flops": sum(e["flops"] for e in ks),
                "compute_statements": sum(e["compute_statements"] for e in ks),
                "tensorized_statements": sum(e["tensorized_statements"] for e in ks),
                "scalar_statements": sorted(s for e in ks for s in e["scalar_statements"]),
                "static_instructions": dict(sorted(inst.items())),
                "copy_bytes": None if why else dict(sorted(copies.items())),
                **({"copy_bytes_unpredicted": "; ".join(why)} if why else {}),
                **{f"{m}_bytes": max(int(e[f"{m}_bytes"]) for e in ks) for m in ("nram", "wram", "sram")},
                "schedule": {}}
    return group_entries(entries, launches, merge)
