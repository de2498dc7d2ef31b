"""GraphTurbo Algorithm 3: groups become instances (one per slice of the split), instance
edges where a consumer instance really reads what a producer instance wrote (the others are
redundant and dropped), and an order of the instances, breadth-first or depth-first,
whichever holds fewer bytes of instance outputs at its peak."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .kgraph import box_points, boxes_meet, written
from .split_info import instance_boxes


@dataclass(frozen=True)
class Instance:
    group: int
    index: int
    core: int = -1        # bound core (binding.py); -1: every core (a kernel tiled by itself)

    def __str__(self):
        return f"g{self.group}.{self.index}" + (f"@{self.core}" if self.core >= 0 else "")


@dataclass(frozen=True)
class Edge:
    src: tuple            # (group, index) of the producer instance
    dst: tuple            # (group, index) of the consumer instance
    tensor: str


def instance_count(group):
    return group.split.factor if group.split.fits else 1


def instance_io(program, groups, kernels):
    """Per instance (group, index): ({(root, writer): box it writes}, {(root, writer): box it
    reads from another group's writer}); boxes are over the writer kernel's axes."""
    writers = {}
    for g in groups:
        for n in g.kernels:
            for r in written(program, kernels[n]):
                writers.setdefault(r, []).append(kernels[n])
    pos = {k.name: i for i, k in enumerate(program.kernels)}
    io = {}
    for g in groups:
        ks = [kernels[n] for n in g.kernels]
        outside = {}
        for n in g.kernels:
            for b in kernels[n].buffers.values():
                r = program.root(b.tensor)
                # earlier writers only: a later part of a tensor written in parts is no producer
                ws = [w for w in writers.get(r, ()) if w.name not in g.kernels and pos[w.name] < pos[n]]
                if ws:
                    prev = outside.get(r, [])
                    outside[r] = prev + [w for w in ws if all(w is not x for x in prev)]
        f = instance_count(g)
        for i in range(f):
            need, _, reads = instance_boxes(program, ks, set(g.sinks), g.split.dim, f, i, outside)
            writes = {(r, n): need[n] for n in g.sinks if n in need for r in written(program, kernels[n])}
            io[(g.gid, i)] = (writes, reads)
    return io


def instance_edges(io):
    """(kept edges, dropped count): a producer/consumer instance pair is an edge only when
    the box the consumer reads meets the box the producer writes."""
    writers = {}
    for key, (writes, _) in io.items():
        for rw, box in writes.items():
            writers.setdefault(rw, []).append((key, box))
    kept, dropped = {}, 0
    for key, (_, reads) in sorted(io.items()):
        for rw, box in sorted(reads.items()):
            for src, wbox in writers.get(rw, ()):
                if src[0] == key[0]:
                    continue
                if boxes_meet(box, wbox):
                    kept.setdefault((src, key, rw[0]), Edge(src, key, rw[0]))
                else:
                    dropped += 1
    return list(kept.values()), dropped


def order_instances(keys, edges, out_bytes, depth_first):
    """Kahn's order over instances: a FIFO (breadth-first) or a stack (depth-first: a
    consumer runs as soon as its inputs exist). Returns (order, peak bytes of instance
    outputs held until their last consumer ran)."""
    succ, indeg, users = {k: [] for k in keys}, {k: 0 for k in keys}, {k: 0 for k in keys}
    for e in edges:
        succ[e.src].append(e.dst)
        indeg[e.dst] += 1
        users[e.src] += 1
    ready = deque(sorted(k for k in keys if indeg[k] == 0))
    order, held, peak, left = [], 0, 0, dict(users)
    preds = {k: [] for k in keys}
    for e in edges:
        preds[e.dst].append(e.src)
    while ready:
        k = ready.pop() if depth_first else ready.popleft()
        order.append(k)
        held += out_bytes[k]
        peak = max(peak, held)
        for p in preds[k]:
            left[p] -= 1
            if left[p] == 0:
                held -= out_bytes[p]
        if users[k] == 0:
            held -= out_bytes[k]
        new = []
        for s in succ[k]:
            indeg[s] -= 1
            if indeg[s] == 0:
                new.append(s)
        ready.extend(sorted(new, reverse=depth_first) if depth_first else sorted(new))
    if len(order) != len(keys):
        raise ValueError("instance graph has a cycle")
    return order, peak


def choose_order(io, edges, itemsize=4):
    """('bfs' | 'dfs', order, {kind: peak bytes}): the order with the lower peak; BFS on a tie."""
    keys = sorted(io)
    out_bytes = {k: sum(box_points(b) for b in io[k][0].values()) * itemsize for k in keys}
    bfs, pb = order_instances(keys, edges, out_bytes, False)
    dfs, pd = order_instances(keys, edges, out_bytes, True)
    peaks = {"bfs": pb, "dfs": pd}
    return ("dfs", dfs, peaks) if pd < pb else ("bfs", bfs, peaks)
