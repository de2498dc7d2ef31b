"""Which kernels share a launch (option `grouping`, both families): consecutive kernels of
one GraphTurbo group that the family can run together form one launch, named after the group;
every other kernel is its own launch. Each family's stitch.py prints and prices them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Launch:
    name: str             # the function the host starts (the kernel's own when alone)
    kernels: tuple        # kernel names, in order
    group: int = -1       # GraphTurbo group id, -1 for a lone kernel

    @property
    def stitched(self):
        return len(self.kernels) > 1


def alone(kernels):
    """One launch per kernel (grouping off)."""
    return [Launch(k.name, (k.name,)) for k in kernels]


def plan_launches(prefix, kernels, grouping, shareable):
    """Launches covering `kernels` (anything with a `.name`, in program order): consecutive
    kernels of one group for which `shareable(k)` holds form one launch `<prefix>_g<id>`
    (`_2`, `_3`, ... when a kernel that runs alone cuts the group)."""
    out, run, run_gid, parts = [], [], None, {}

    def flush():
        if len(run) > 1:
            n = parts[run_gid] = parts.get(run_gid, 0) + 1
            name = f"{prefix}_g{run_gid}" + (f"_{n}" if n > 1 else "")
            out.append(Launch(name, tuple(k.name for k in run), run_gid))
        else:
            out.extend(alone(run))
        run.clear()

    for k in kernels:
        grp = grouping.group_of(k.name) if grouping is not None else None
        gid = grp.gid if grp is not None and shareable(k) else None
        if gid is None or gid != run_gid:
            flush()
        run_gid = gid
        if gid is None:
            out.append(Launch(k.name, (k.name,)))
        else:
            run.append(k)
    flush()
    return out


def launch_entries(entries, launches, merge):
    """The plan's per-launch entries from its per-kernel ones: a lone kernel's own; a grouped
    launch's, its head, the numbers `merge(launch, its kernels' entries)` adds up, and the
    kernels' own entries under `kernels`."""
    by = {e["name"]: e for e in entries}
    out = []
    for ln in launches:
        if not ln.stitched:
            out.append(by[ln.name])
            continue
        ks = [by[n] for n in ln.kernels]
        out.append({"name": ln.name, "op": "Group", "node": ks[0]["node"], "fused": list(ln.kernels), "group": ln.group,
                    **merge(ln, ks), "kernels": ks})
    return out


def kernel_entries(entries):
    """Every kernel's own plan entry, in program order: a grouped launch's are under it
    (`kernels`), a lone kernel's is its launch's. For tools that read a plan per kernel."""
    return [e for launch in entries for e in (launch["kernels"] if launch.get("op") == "Group" else [launch])]
