"""Grouped launches (option `grouping`, issue 16): consecutive kernels of GraphTurbo groups run
in ONE athread_spawn instead of one each (a run spans group boundaries: _Runs).

A group launch is a CPE function that fetches a table of its kernels' parameter structs and
calls the kernels' own CPE functions in order, with an array barrier between them (a kernel
reads what other CPEs wrote in the one before). Each kernel keeps its schedule, its LDM
buffers (allocated and freed inside it) and its DMA, so the predictor's numbers add up
exactly: a launch moves its kernels' bytes plus one fetch of the table per CPE. The arena
reuses bytes across the kernels of a launch as across launches: the array barrier orders a
kernel's writes before the next one's (the emulator's write-conflict and race checks follow
barriers).

Intermediates still go through main memory between the kernels of a launch, except what
stitch_producers.py recomputes in its consumer's LDM (cheap producers, halos recomputed);
keeping a convolution's output in the 64 LDMs for the next one is not built. Special
kernels (their own printers) run alone.
"""
from __future__ import annotations

from dataclasses import dataclass

from ....support.names import c_comment
from ...launches import launch_entries as group_entries, plan_launches as plan_runs
from ..cost import model
from .prefetch import prefetched_halves


def _shareable(k):
    # Row-shared kernels may share a launch: the CPEs of a mesh row share their tile count
    # (schedule/grid.py), so they return together or all meet at every row barrier. Mesh
    # kernels (kinds/mesh_gemm.py) run alone: light ResNet-50 with them inside its launches
    # failed under the emulator (a broadcast into LDM a CPE had not allocated), not found yet.
    return k.kind == "compute" and k.schedule is not None


class _Runs:
    """A grouping seen by launches: consecutive grouped kernels that `shareable` admits, across
    group boundaries, as one group (the run's first group's id). On Sunway a group boundary
    needs no spawn of its own: intermediates go through main memory between any two kernels
    of a launch, and its array barrier orders them as a new spawn would; one launch saves the
    spawns and lets a kernel prefetch the next one's first fetches (prefetch.py) where groups
    used to end."""

    def __init__(self, kernels, grouping, shareable):
        self.head = {}
        gid = None
        for k in kernels:
            grp = grouping.group_of(k.name)
            if grp is None or not shareable(k):
                gid = None
                continue
            gid = grp.gid if gid is None else gid
            self.head[k.name] = gid

    def group_of(self, name):
        return _Gid(self.head[name]) if name in self.head else None


@dataclass(frozen=True)
class _Gid:
    gid: int      # what backends/launches.py reads of a group


def launch_runs(program, shareable):
    """Launches covering program.kernels in order: each run of consecutive grouped kernels
    that `shareable` admits is one launch (backends/launches.py names it after its first group)."""
    return plan_runs(program.prefix, program.kernels, _Runs(program.kernels, program.grouping, shareable), shareable)


def plan_launches(program):
    """The launches of a grouped program: runs of consecutive shareable kernels (_Runs)."""
    return launch_runs(program, _shareable)


def group_launches(program, target, options):
    """Option `grouping`: each run of consecutive shareable grouped kernels runs in one athread_spawn."""
    pipelined = str((options or {}).get("parallel", "data")) == "pipeline"
    program.target_state.launches = None if program.grouping is None or pipelined else plan_launches(program)
    return program


def para_structs(launches):
    out = []
    for ln in launches:
        if ln.stitched:
            out += [f"struct {ln.name}_para {{", f"    void *k[{len(ln.kernels)}];   /* {', '.join(ln.kernels)} */", "};"]
    return out


def launch_c(ln, api, kernels=None):
    """The CPE function of a grouped launch. `kernels`: name -> Kernel, for the prefetch
    links (prefetch.py): a target's prefetched halves are allocated before the barrier that
    opens its previous kernel (which issues their first fetch) and freed after the target
    returns."""
    lines = [f"/* group {ln.group}: {c_comment(' '.join(ln.kernels))} in one launch */",
             f"void {ln.name}(void *arg)", "{", f"    struct {ln.name}_para p;", "    SW_REPLY rp = 0;",
             "    sw_get(&p, arg, (int)sizeof(p), 0, 0, &rp);", "    SW_WAIT(rp, 1);"]
    sched = {n: kernels[n].schedule for n in ln.kernels} if kernels else {}
    target = [bool(getattr(sched.get(n), "prefetched", ())) for n in ln.kernels]
    if any(target):     # targets are never adjacent: one prefetch state is live at a time
        members = " ".join(f"struct {n}_pf t{i};" for i, n in enumerate(ln.kernels) if target[i])
        lines.append(f"    union {{ {members} }} pf;   /* the LDM stack holds one */")
    for i, name in enumerate(ln.kernels):
        nxt = i + 1 < len(ln.kernels) and target[i + 1]
        if nxt:     # before the barrier: a broadcast lands in every CPE's halves, allocated by then
            k = kernels[ln.kernels[i + 1]]
            for n, size in prefetched_halves(k):
                lines.append(f"    pf.t{i + 1}.X_{n} = (float *)ldm_malloc({size});")
            if not i and any(b.shared for b in k.schedule.boxes if b.name in k.schedule.prefetched):
                raise AssertionError(f"{ln.name}: broadcast prefetch for {k.name} with no barrier before it (prefetch.py)")
        if i:
            lines.append(f"    {api.array_sync};   /* {name} reads what other CPEs wrote */")
        if nxt:
            lines.append(f"    const struct sw_next nx{i + 1} = {{{ln.kernels[i + 1]}_prefetch, p.k[{i + 1}], &pf.t{i + 1}}};")
        if target[i] or getattr(sched.get(name), "hook", False):
            lines.append(f"    {name}_in(p.k[{i}], {f'&pf.t{i}' if target[i] else '0'}, {f'&nx{i + 1}' if nxt else '0'});")
        else:
            lines.append(f"    {name}(p.k[{i}]);")
        if target[i]:
            for n, size in reversed(prefetched_halves(kernels[name])):
                lines.append(f"    ldm_free(pf.t{i}.X_{n}, {size});")
    return "\n".join(lines + ["}", ""])


def para_bytes(ln):
    return 8 * len(ln.kernels)


def launch_entries(entries, launches, hw, cores):
    """The plan's per-launch entries from its per-kernel ones (cost/predict.py): DMA adds up,
    plus the table fetch; LDM is the largest kernel's; modelled time the kernels' minus the
    spawns saved plus one array barrier between kernels."""
    def merge(ln, ks):
        dma = {d: {x: sum(int(e["dma"][d][x]) for e in ks) for x in ("ops", "bytes")} for d in ("get", "put")}
        dma["get"]["ops"] += cores
        dma["get"]["bytes"] += cores * para_bytes(ln)
        saved = (len(ks) - 1) * (float(model.hwget(hw, "spawn_seconds")) - barrier_seconds(hw))
        rc = [e["regcomm"] for e in ks if "regcomm" in e]
        messages = {"regcomm": {x: sum(int(r.get(x, 0)) for r in rc) for x in rc[0]}} if rc else {}
        rma = [e["rma"] for e in ks if "rma" in e]
        if rma:     # RMA broadcasts of the launch's kernels (SW26010-Pro sharing)
            messages["rma"] = {x: sum(int(r.get(x, 0)) for r in rma) for x in sorted({x for r in rma for x in r})}
        return {**messages, "flops": sum(e["flops"] for e in ks), "dma": dma,
                "ldm_bytes": max(int(e["ldm_bytes"]) for e in ks), "ldm_budget": max(int(e["ldm_budget"]) for e in ks),
                "compulsory_bytes": sum(int(e["compulsory_bytes"]) for e in ks),
                "modeled_seconds": sum(float(e["modeled_seconds"]) for e in ks) - saved,
                "roofline_seconds": sum(float(e["roofline_seconds"]) for e in ks),
                "dma_seconds": sum(float(e.get("dma_seconds", 0.0)) for e in ks),
                "compute_seconds": sum(float(e.get("compute_seconds", 0.0)) for e in ks)}
    return group_entries(entries, launches, merge)


def barrier_seconds(hw):
    """One array barrier: charged as a row barrier's cycles (toolchain `row_sync_cycles`, assumed)."""
    return float(model.hwget(hw, "row_sync_cycles")) / float(model.hwget(hw, "clock_hz"))
