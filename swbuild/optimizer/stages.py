"""Cutting a program's kernel list into consecutive stages (pipeline over MPI ranks,
swbuild/driver/mpi.py): what is live across a cut, and cuts that balance modelled times."""
from __future__ import annotations

import numpy as np


def storage(program, t):
    """The root whose bytes hold tensor t: a Concat input placed inside the Concat output
    (optimizer/memory.py: inplace_concat) is that output's, transitively."""
    r = program.root(t)
    while r in program.slices:
        r = program.root(program.slices[r][0])
    return r


def live_across(program, boundary):
    """Storage roots (sorted) live across the boundary before kernel `boundary`. A Concat
    written in place is one storage: its parts written before the boundary and the Concat
    read after it make it live (before, only the parts' own roots were looked at, and a
    pipeline cut between a part's writer and the Concat's reader lost that part)."""
    n = len(program.kernels)
    first_write, last_read = {}, {}
    for i, k in enumerate(program.kernels):
        out = storage(program, k.buffers[k.out].tensor)
        first_write.setdefault(out, i)
        for b in k.buffers.values():
            r = storage(program, b.tensor)
            if b.name != k.out:
                last_read[r] = i
    ins = {storage(program, t) for t in program.inputs}
    outs = {storage(program, t) for t in program.outputs}
    g = program.graph
    live = []
    for r in sorted(set(first_write) | ins):
        if g.tensors[r].data is not None:
            continue
        made = r in ins or first_write.get(r, n) < boundary
        needed = r in outs or last_read.get(r, -1) >= boundary
        if made and needed:
            live.append(r)
    return live


def tensor_bytes(program, r):
    t = program.graph.tensors[r]
    return int(t.size) * np.dtype(t.dtype).itemsize


def cut_bytes(program, boundary):
    """Bytes live across the cut before kernel `boundary` (one item)."""
    return sum(tensor_bytes(program, r) for r in live_across(program, boundary))


def balance(times, parts, cut_cost=None):
    """Cut `times` (per kernel, in order) into `parts` non-empty consecutive ranges minimising the
    largest range's time plus the cost of sending across its end (`cut_cost(b)` for a cut before
    kernel b). Exact (dynamic programming over cut positions); returns [(first, last), ...]."""
    n = len(times)
    if parts > n:
        raise ValueError(f"{parts} stages but only {n} kernels")
    cut = cut_cost or (lambda b: 0.0)
    pre = np.concatenate([[0.0], np.cumsum(times)])
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    arg = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0.0
    for p in range(1, parts + 1):
        for j in range(p, n - (parts - p) + 1):
            for i in range(p - 1, j):
                if best[p - 1][i] == inf:
                    continue
                c = max(best[p - 1][i], pre[j] - pre[i] + (cut(j) if j < n else 0.0))
                if c < best[p][j]:
                    best[p][j], arg[p][j] = c, i
    out, j = [], n
    for p in range(parts, 0, -1):
        i = arg[p][j]
        out.append((i, j))
        j = i
    return out[::-1]
