"""GraphTurbo Algorithm 1: how a group of kernels splits into instances that fit local memory.

For each dimension d of the group's output (outermost first) and each candidate factor f
(the core count's balanced factors, then up to the extent), the output is cut into f slices
along d; each slice's requirements are propagated back through the group's kernels
(`kgraph.input_boxes`), giving every intermediate's box and the peak bytes one instance holds.
A split fits when that peak fits the local memory of one core. Among fitting splits the
best is lexmax(n_d, -f_d, -d): most cores kept busy in balance, then fewest instances, then
the outermost dimension.

What an instance holds: its intermediates (they stay in local memory; that is the point),
the boxes of activations it reads from outside the group and the box it writes. Weights are
streamed through a slab of at most a quarter of local memory (the realiser prefetches the
next layer's slab while the current one computes), so a weight costs min(its box, that slab).
Halos of spatial convolutions are recomputed: the summed boxes over instances may exceed
the kernels' points by at most MAX_RECOMPUTE.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .kgraph import box_points, box_union, input_boxes, producer_box, written

MAX_RECOMPUTE = 1.25    # computed points over kernel points a split may cost in halo recompute
WEIGHT_SLAB = 4         # weights stream through 1/WEIGHT_SLAB of local memory


@dataclass(frozen=True)
class Budget:
    """The target's numbers grouping reads (from the toolchain file)."""
    local_bytes: int      # local memory per core (LDM, NRAM) kernels may use
    cores: int            # cores instances are bound to
    itemsize: int = 4     # kernels compute in float32


@dataclass(frozen=True)
class SplitInfo:
    dim: int              # output dimension cut (index into the sinks' axes)
    axis: str             # its name in the first sink
    factor: int           # instances
    cores: int            # n_d: cores kept busy in balance (largest divisor of factor <= cores)
    footprint: int        # peak bytes one instance holds
    recompute: float      # summed instance work over the kernels' work (halo recompute)
    fits: bool = True     # False: no split fits (a lone kernel then tiles by itself)

    def __str__(self):
        s = f"{self.axis}/{self.factor} on {self.cores} cores, {self.footprint} B/instance"
        if self.recompute > 1.0:
            s += f", recompute {self.recompute:.3f}"
        return s if self.fits else s + " (does not fit)"


def balanced_cores(f, cores):
    if f <= cores:
        return f
    return max(c for c in range(1, cores + 1) if f % c == 0)


def candidate_factors(extent, cores):
    c = {1, min(extent, cores), extent}
    p = 2
    while p <= min(extent, cores):
        c.add(p)
        p *= 2
    m = 2 * cores
    while m <= extent and len(c) < 24:
        c.add(m)
        m += cores
    return sorted(x for x in c if 1 <= x <= extent)


def slice_of(extent, f, i):
    chunk = -(-extent // f)
    return i * chunk, min(extent, (i + 1) * chunk) - 1


def instance_boxes(program, kernels, sinks, dim, f, i, outside=None):
    """Boxes of instance i of a group cut into f along `dim` of its sinks:
    need {kernel name: box of its output axes it computes}, external {root: (bytes, is
    constant)} it reads from outside; with `outside` ({store: [writer Kernel outside the
    group]}) also reads {(root, writer name): box of that writer's axes}."""
    byname = {k.name: k for k in kernels}
    made = {}
    for k in kernels:
        for r in written(program, k):
            made.setdefault(r, []).append(k.name)
    need = {}
    for k in kernels:
        if k.name in sinks:
            box = [(0, a.extent - 1) for a in k.axes]
            if f > 1:           # one instance holds the whole output (a scalar one too)
                box[dim] = slice_of(k.axes[dim].extent, f, i)
            need[k.name] = tuple(box)
    external, reads = {}, {}
    for k in reversed(kernels):
        if k.name not in need:
            continue
        for buf, box in input_boxes(k, need[k.name]).items():
            r = program.root(k.buffers[buf].tensor)
            inside = [p for p in made.get(r, ()) if p != k.name]
            for p in inside:
                need[p] = box_union(need.get(p), producer_box(program, k, buf, box, byname[p]))
            if not inside or (outside and r in outside):
                b = box_points(box) * 4
                const = program.graph.tensors[r].data is not None
                external[r] = (max(external.get(r, (0,))[0], b), const)
            for w in (outside or {}).get(r, ()):
                key = (r, w.name)
                reads[key] = box_union(reads.get(key), producer_box(program, k, buf, box, w))
    return (need, external) if outside is None else (need, external, reads)


def footprint(program, kernels, sinks, dim, f, i, budget):
    """Peak bytes instance i holds, walking its kernels in order."""
    need, external = instance_boxes(program, kernels, sinks, dim, f, i)
    item = budget.itemsize
    slab = budget.local_bytes // WEIGHT_SLAB
    writers = {}
    for k in kernels:
        for r in written(program, k):
            writers.setdefault(r, []).append(k.name)
    last_use = {}
    for j, k in enumerate(kernels):
        for n, b in k.buffers.items():
            if n != k.out:
                for w in writers.get(program.root(b.tensor), ()):
                    last_use[w] = j
    peak, live = 0, {}
    for j, k in enumerate(kernels):
        live[k.name] = box_points(need.get(k.name, ())) * item
        ext = 0
        for r in {program.root(b.tensor) for n, b in k.buffers.items() if n != k.out}:
            if r in external:
                nbytes, const = external[r]
                ext += min(nbytes, slab) if const else nbytes
        peak = max(peak, sum(live.values()) + ext)
        for name in [n for n in live if last_use.get(n, j) <= j]:   # read for the last time
            del live[name]
    return peak, need


def recompute_ratio(program, kernels, need_mid, f):
    total = sum(k.points for k in kernels)
    if len(kernels) == 1 or not total:
        return 1.0
    return sum(box_points(need_mid.get(k.name, ())) for k in kernels) * f / total


def split_info(program, kernels, sinks, budget, limit=None):
    """The best SplitInfo of a group (kernels in program order; sinks: the names whose
    output leaves the group), or one with fits=False. Candidates are tried best first in
    (n_d, -f_d, -d), so the first that fits is the lexmax. With `limit`, the search stops
    (fits=False) once only factors above it are left: the caller would refuse those."""
    first = next(k for k in kernels if k.name in sinks)
    rank = min(len(k.axes) for k in kernels if k.name in sinks)
    cands = []
    for d in range(rank):
        extent = min(k.axes[d].extent for k in kernels if k.name in sinks)
        cands += [(d, f) for f in candidate_factors(extent, budget.cores)]
    cands = cands or [(0, 1)]     # scalar outputs: one instance, nothing to cut
    cands.sort(key=lambda c: (-balanced_cores(c[1], budget.cores), c[1], c[0]))
    axis = lambda d: first.axes[d].name if first.axes else "-"       # noqa: E731
    fallback = None
    last_within = max((i for i, (_, f) in enumerate(cands) if f <= limit), default=-1) if limit else len(cands)
    for i, (d, f) in enumerate(cands):
        if i > last_within:
            break
        fp0, _ = footprint(program, kernels, sinks, d, f, 0, budget)
        fpm, need = footprint(program, kernels, sinks, d, f, f // 2, budget) if f > 1 else (fp0, _)
        fp = max(fp0, fpm)
        rc = recompute_ratio(program, kernels, need, f)
        info = SplitInfo(d, axis(d), f, balanced_cores(f, budget.cores), fp, round(rc, 4))
        if fp <= budget.local_bytes and rc <= MAX_RECOMPUTE:
            return info
        if fallback is None or (fp, -info.cores) < (fallback.footprint, -fallback.cores):
            fallback = info
    if fallback is None:      # nothing within the limit: the smallest split, unevaluated
        d, f = cands[0]
        fallback = SplitInfo(d, axis(d), f, balanced_cores(f, budget.cores), budget.local_bytes + 1, 1.0)
    return replace(fallback, fits=False)
