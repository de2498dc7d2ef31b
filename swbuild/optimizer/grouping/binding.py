"""GraphTurbo Algorithm 4: core binding and buffer scope.

Bindings are inferred from consumers to producers: an instance nobody reads (or whose
consumers sit on different cores) is bound round-robin by its index; one whose consumer
instances all sit on one core goes to that core. A tensor between groups stays in local
memory only when every edge carrying it stays on one core and it is not a graph input or
output; otherwise its scope is main memory. Where binding or scope differ, data movement is
inserted: the instances of a main-memory tensor write their pieces in place (concat), a
piece read on another core than it was made on is redistributed through main memory, and
an intermediate kept local that the graph also outputs is copied out.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Move:
    kind: str             # "concat" | "redistribute" | "copy"
    tensor: str
    count: int            # pieces concatenated, edges redistributed, or 1

    def __str__(self):
        return f"{self.kind} %{self.tensor} x{self.count}"


def bind_cores(groups, edges, cores):
    """{(group, index): core}; instances of groups that do not fit get -1 (every core)."""
    fits = {g.gid: g.split.fits for g in groups}
    succ = {}
    for e in edges:
        succ.setdefault(e.src, []).append(e.dst)
    core = {}
    for g in sorted(groups, key=lambda g: -g.gid):     # consumers before producers
        n = g.split.factor if g.split.fits else 1
        for i in range(n):
            if not fits[g.gid]:
                core[(g.gid, i)] = -1
                continue
            seen = {core.get(d, -1) for d in succ.get((g.gid, i), ())}
            core[(g.gid, i)] = seen.pop() if len(seen) == 1 and -1 not in seen else i % cores
    return core


def scopes_and_moves(groups, edges, core, graph_io, nbytes, local_bytes, around=None):
    """({root: "local" | "global"}, [Move]) for every tensor a group writes. A tensor kept
    local between groups must also fit whole next to the larger of the two groups' instance
    footprints (nbytes: root -> bytes); otherwise it spills to main memory. `around`: root ->
    the roots it lives inside (itself first; a Concat part is read through its output too)."""
    fp = {g.gid: g.split.footprint for g in groups}
    scope, moves = {}, []
    by_tensor = {}
    for e in edges:
        by_tensor.setdefault(e.tensor, []).append(e)
    for g in groups:
        n = g.split.factor if g.split.fits else 1
        for r in g.outputs:
            es = [e for c in (around or {}).get(r, [r]) for e in by_tensor.get(c, [])]
            crossing = sum(1 for e in es if core[e.src] != core[e.dst] or core[e.src] < 0)
            room = all(nbytes[r] + max(fp[g.gid], fp[e.dst[0]]) <= local_bytes for e in es)
            local = g.split.fits and bool(es) and not crossing and r not in graph_io and room
            scope[r] = "local" if local else "global"
            if not local and n > 1:
                moves.append(Move("concat", r, n))
            if crossing and g.split.fits:
                moves.append(Move("redistribute", r, crossing))
            if not local and r in g.reused:        # read inside the group too: kept local, copied out
                moves.append(Move("copy", r, n))
        for r in g.intermediates:
            scope[r] = "local"
    return scope, moves
