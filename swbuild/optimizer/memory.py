"""Static memory plan: every intermediate gets an offset in one arena, by liveness.

Tensors are placed largest first at the lowest offset that does not overlap a placed
tensor whose lifetime intersects (greedy by size, as TFLite's arena planner does). The
plan reports its own lower bound: the largest total of simultaneously live bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


@dataclass
class MemoryPlan:
    offsets: dict        # root tensor -> arena offset
    sizes: dict          # root tensor -> bytes
    lifetimes: dict      # root tensor -> (first kernel, last kernel)
    arena_bytes: int
    lower_bound: int

    def __str__(self):
        return f"arena {self.arena_bytes} bytes (liveness lower bound {self.lower_bound}) for {len(self.offsets)} tensors"


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_memory(program):
    g = program.graph
    external = {program.root(t) for t in program.inputs + program.outputs}
    life = {}
    for i, k in enumerate(program.kernels):
        for b in k.buffers.values():
            r = program.root(b.tensor)
            if r in external or g.tensors[r].data is not None:
                continue
            lo, hi = life.get(r, (i, i))
            life[r] = (min(lo, i), max(hi, i))
    sizes = {t: _align(g.tensors[t].nbytes) for t in life}
    order = sorted(life, key=lambda t: (-sizes[t], life[t][0], t))
    placed, offsets = [], {}
    for t in order:
        lo, hi = life[t]
        busy = sorted((offsets[u], offsets[u] + sizes[u]) for u in placed
                      if not (life[u][1] < lo or hi < life[u][0]))
        off = 0
        for a, b in busy:
            if off + sizes[t] <= a:
                break
            off = max(off, b)
        offsets[t] = off
        placed.append(t)
    arena = max((offsets[t] + sizes[t] for t in offsets), default=0)
    bound = max((sum(sizes[t] for t in life if life[t][0] <= i <= life[t][1])
                 for i in range(len(program.kernels))), default=0)
    program.memory = MemoryPlan(offsets, sizes, life, arena, bound)
    return program
