"""DMA footprints: the rectangular box of a buffer that one step of a kernel touches.

Each (buffer, context, pad value) triple of a kernel gets one LDM box: the union of the
bounding boxes of its loads (PPCG's rectangular over-approximation). Index expressions are
affine in the axes, so composite subscripts such as `yy*stride + ry` of a strided
convolution give their exact range from the coefficients.

Where the box is fetched (swTVM: at the outermost loop whose iteration changes it) is decided
at run time by comparing footprints: a box is re-fetched exactly when the footprint of the
next step differs from the one resident in LDM, so a box that depends on no tiled loop is
fetched once per CPE, one that depends on the tile only once per tile, and so on.

The transfer of one footprint (clamped to the tensor):

* trailing dimensions every footprint covers whole merge into one contiguous run;
* the dimension above them is the `bsize`/`stride` of one strided DMA (a 2-D slab);
* dimensions above that are loops of strided DMAs;
* a constant tensor (weights) whose box is a tile-aligned block is re-laid out at compile
  time so every box is one contiguous block (`blocked`): one DMA per box, zero padded.

Pads are materialised in LDM: a box with loads that may fall outside the tensor is laid
out with its unclamped extents; the DMA brings the clamped part to the start of the buffer
and the kernel expands it in place and fills the rest with the pad value, so the compute
loops carry no bounds guards at all.

`footprints` and `transfers` are the Python twins of the C the slave printer emits; the
compile-time prediction (`cost/predict.py`) counts DMA with them, vectorised over all
steps with numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ....ir.graph import Tensor, is_splat
from ....ir.loopnest import affine, index_range, iter_loads


@dataclass
class BoxPlan:
    buf: str
    context: str              # "body" (inside reduce loops), "epi" (after them) or "out"
    pad: float | None         # the pad value of its loads (None: loads are always in bounds)
    index: list               # per dim: list of affine dicts {var: coef, None: const}
    shape: tuple              # the buffer view's shape
    axis_extents: dict        # extent of every axis of the kernel
    name: str = ""            # C identifier suffix, unique in the kernel
    pad_dims: tuple = ()      # dims where some load may fall outside the tensor
    # decided by the schedule
    tiles: dict = None        # tile size per axis
    merge: int = 0            # first dim of the contiguous tail
    blocked: tuple = None     # block extent per dim when the constant is re-laid out
    block_tensor: str = None  # the re-laid-out constant
    wide: tuple = ()          # dims whose block holds several tiles of a reduce axis (passes/wide_weights.py)
    halves: int = 1           # 2 when double-buffered
    shared: bool = False      # broadcast to the CPE's mesh row (row sharing, grid.py)
    share_form: str = None    # 2-D sharing: "row", "col" or "array" (grid.py), else the schedule's width
    level: int = -1           # innermost reduce-tile loop (position in the order) it depends on
    notes: list = field(default_factory=list)
    stage: "StageBox" = None  # buffer stitching: what the box computes in LDM when it lands
    feeds: str = None         # buffer stitching: the box whose stage reads this one (not the compute)
    # a body box that also serves the epilogue's loads of its tensor (host_epilogue_loads): the
    # reduce axes it depends on, which the tile search then keeps whole
    keep_whole: frozenset = frozenset()
    epi_host: bool = False

    # the index never changes after construction: its variables are computed once (the tile
    # search asks for them hundreds of thousands of times)
    @cached_property
    def vars(self):
        return frozenset(v for dim in self.index for aff in dim for v in aff if v)

    @cached_property
    def _dim_vars(self):
        return tuple(frozenset(v for aff in dim for v in aff if v) for dim in self.index)

    def dim_vars(self, d):
        return self._dim_vars[d]

    @cached_property
    def _span_memo(self):
        # per dim: its variables (sorted), and its span by their tiles (the tile search asks
        # for a dim's span again whenever a tile of another dim changes)
        return [(sorted(vs), {}) for vs in self._dim_vars]

    # -- static extents ---------------------------------------------------------------
    def span(self, tiles):
        """Largest unclamped extent per dim over all tiles of the given sizes."""
        if self.blocked is not None:
            return tuple(self.blocked)
        out = []
        for d, (vs, memo) in enumerate(self._span_memo):
            key = tuple(tiles[v] for v in vs)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = self._span_dim(d, tiles)
            out.append(hit)
        return tuple(out)

    def _span_dim(self, d, tiles):
        best = 0
        for first in (True, False):
            lo, hi = None, None
            for aff in self.index[d]:
                a, b = _aff_range(aff, tiles, self.axis_extents, first)
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
            best = max(best, hi - lo + 1)
        return best if d in self.pad_dims else min(best, self.shape[d])

    def cap(self, tiles):
        """LDM elements of one half of the box."""
        return math.prod(self.span(tiles))

    @cached_property
    def _spans_tensor(self):
        # per dim: the footprint over the axes' full extents covers the tensor's dim
        out = []
        for d, affs in enumerate(self.index):
            lo, hi = _full_range(affs, self.axis_extents)
            out.append(lo <= 0 and hi >= self.shape[d] - 1)
        return tuple(out)

    def spans_tensor(self, d):
        """With its axes not split, every footprint covers dim d of the tensor."""
        return self._spans_tensor[d]

    def whole(self, d, tiles):
        """Every footprint covers dim d whole: its axes are not split and it spans the tensor."""
        vs = self.dim_vars(d)
        if any(tiles[v] < self.axis_extents[v] for v in vs):
            return False
        return self.spans_tensor(d)

    def merge_dim(self, tiles):
        m = len(self.shape)
        while m > 0 and self.whole(m - 1, tiles):
            m -= 1
        return m

    def finish(self, tiles):
        """Fix the static DMA shape for the chosen tiles."""
        self.tiles = dict(tiles)
        self.merge = self.merge_dim(tiles)

    # -- one footprint ---------------------------------------------------------------
    def footprint(self, ranges, lower=min, upper=max):
        """Unclamped (lo, hi) per dim for {var: (start, count)}; with lower/upper = numpy's
        minimum/maximum, starts and counts may be arrays (cost/predict.py: every step at once)."""
        los, his = [], []
        for d, affs in enumerate(self.index):
            lo = hi = None
            for aff in affs:
                a, b = aff_lohi(aff, ranges)
                lo = a if lo is None else lower(lo, a)
                hi = b if hi is None else upper(hi, b)
            if self.blocked is not None:
                if d in self.wide:          # the block holding the tile (passes/wide_weights.py)
                    lo = lo // self.blocked[d] * self.blocked[d]
                hi = lo + self.blocked[d] - 1
            los.append(lo)
            his.append(hi)
        return los, his

    def transfer(self, lo, hi, itemsize=4):
        """(calls, bytes, contiguous chunk bytes) of fetching one footprint."""
        r = transfers(self, [np.asarray([x]) for x in lo], [np.asarray([x]) for x in hi], itemsize)
        return int(r[0][0]), int(r[1][0]), int(r[2][0])


@dataclass
class StageBox:
    """A box that feeds a stage (buffer stitching, stitch_producers.py): when it lands, the
    CPE computes `stage` (ir.loopnest.Stage) over the footprint of `box`, the intermediate
    the consumer reads, in the consumer's coordinates (one LDM buffer, never fetched)."""
    stage: object
    box: BoxPlan
    pad: float | None = None  # the pad value of the consumer's loads of it (their box key)
    inputs: dict = None       # producer's buffer -> the box holding it (this one, then constants')

    def __repr__(self):
        return f"StageBox({self.stage.key}, {self.box.index!r}, {self.pad!r}, {self.inputs!r})"


def aff_lohi(aff, ranges):
    """(lo, hi) of one affine expression {var: coef, None: const} over {var: (start, count)};
    starts and counts may be numpy arrays (cost/predict.py replays all steps at once)."""
    lo = hi = aff.get(None, 0)
    for v, c in aff.items():
        if v is None:
            continue
        s, n = ranges[v]
        if c > 0:
            lo = lo + c * s
            hi = hi + c * (s + n - 1)
        else:
            lo = lo + c * (s + n - 1)
            hi = hi + c * s
    return lo, hi


def _aff_range(aff, tiles, extents, first):
    """(lo, hi) of one affine expression over the first (or last) tile of each axis."""
    ranges = {}
    for v in aff:
        if v is None:
            continue
        t, e = tiles[v], extents[v]
        s, n = 0, min(t, e)
        if not first and e - (e - 1) // t * t >= n:   # a short last tile: the first one is the larger
            s = (e - 1) // t * t
            n = e - s
        ranges[v] = (s, n)
    return aff_lohi(aff, ranges)


def _full_range(affs, extents):
    lo = hi = None
    for aff in affs:
        a, b = aff_lohi(aff, {v: (0, extents[v]) for v in aff if v is not None})
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return lo, hi


def transfers(b, lo, hi, itemsize=4, n=None):
    """Vectorised DMA shape of footprints: lo/hi are lists (per dim) of int arrays.

    Returns (calls, bytes, chunk bytes) arrays; an empty footprint (entirely outside the
    tensor) costs nothing. Mirrors `slave._emit_fetch` exactly."""
    if n is None:
        n = len(lo[0]) if lo else 1
    shape = b.shape
    if b.blocked is not None:
        by = math.prod(b.blocked) * itemsize
        return np.ones(n, np.int64), np.full(n, by, np.int64), np.full(n, by, np.int64)
    if not shape:
        return np.ones(n, np.int64), np.full(n, itemsize, np.int64), np.full(n, itemsize, np.int64)
    cex = []
    for d in range(len(shape)):
        clo = np.maximum(lo[d], 0)
        cex.append(np.minimum(hi[d], shape[d] - 1) - clo + 1)
    empty = np.zeros(n, bool)
    for e in cex:
        empty |= e <= 0
    m = b.merge
    if m == 0:
        tot = math.prod(shape) * itemsize
        calls, by, chunk = np.ones(n, np.int64), np.full(n, tot, np.int64), np.full(n, tot, np.int64)
    else:
        c = m - 1
        inner = math.prod(shape[m:])
        run = cex[c] * inner
        if c == 0:
            calls, by, chunk = np.ones(n, np.int64), run * itemsize, run * itemsize
        else:
            calls = np.ones(n, np.int64)
            for d in range(c - 1):
                calls = calls * cex[d]
            by = calls * cex[c - 1] * run * itemsize
            contiguous = (cex[c] == shape[c]) | (cex[c - 1] == 1)
            chunk = np.where(contiguous, cex[c - 1] * run * itemsize, run * itemsize)
    zero = np.zeros(n, np.int64)
    return np.where(empty, zero, calls), np.where(empty, zero, by), np.where(empty, zero, chunk)


def box_plans(kernel):
    """One BoxPlan per (buffer, context, pad value); the output box last."""
    plans = []
    extents = {a.name: a.extent for a in tuple(kernel.axes) + tuple(kernel.reduce_axes)}
    full = {n: (0, e - 1) for n, e in extents.items()}
    contexts = [("body", kernel.body), ("epi", kernel.epilogue)]
    if kernel.combine is None:          # an element-wise kernel computes in its epilogue pass
        contexts = [("epi", kernel.body), ("epi", kernel.epilogue)]
    by_key = {}
    for ctx, expr in contexts:
        for ld in iter_loads(expr):
            by_key.setdefault((ld.buf, ctx, ld.pad), []).append(ld)
    stages = {st.buf: st for st in kernel.stages}
    hosted = host_epilogue_loads(kernel, by_key, stages, extents)
    for i, ((buf, ctx, pad), loads) in enumerate(by_key.items()):
        if buf in stages:
            plans += _staged_plans(kernel, stages[buf], ctx, pad, loads, extents, f"x{i}")
            continue
        shape = kernel.buffers[buf].shape
        index = [_affs(kernel, loads, d) for d in range(len(shape))]
        _widen_rows(index, shape, extents)
        pad_dims = ()
        if pad is not None:
            pad_dims = tuple(d for d in range(len(shape))
                             if any(_oob(ld.index[d], full, shape[d]) for ld in loads))
        plans.append(BoxPlan(buf, ctx, None if not pad_dims else pad, index, shape, extents,
                             name=f"x{i}", pad_dims=pad_dims, keep_whole=hosted.get((buf, ctx, pad), frozenset()),
                             epi_host=(buf, ctx, pad) in hosted))
    out = kernel.buffers[kernel.out]
    index = [[{a.name: 1, None: o}] for a, o in zip(kernel.axes, kernel.out_offset)]
    plans.append(BoxPlan(kernel.out, "out", None, index, out.shape, extents, name="out"))
    return plans


ROW_WASTE = 8       # a row whose footprint misses at most 1/ROW_WASTE of it is fetched whole


def _widen_rows(index, shape, extents):
    """A box whose innermost dim misses a few elements of the tensor's rows (a stride-2 3x3
    pooling reads columns 0..110 of 112) reads the whole rows: its footprint is then one
    contiguous run instead of a strided DMA of rows (a 444-byte chunk runs at 40% of a
    25 KB one's bandwidth on SW26010), for at most 1/ROW_WASTE more bytes. The two constant
    forms make every footprint, span and the printed fetch cover the row."""
    if not shape:
        return
    d = len(shape) - 1
    lo, hi = _full_range(index[d], extents)
    miss = shape[d] - (hi - lo + 1)
    if lo >= 0 and hi <= shape[d] - 1 and 0 < miss <= shape[d] // ROW_WASTE \
            and all(_dense(a, extents) for a in index[d]):
        index[d] += [{None: 0}, {None: shape[d] - 1}]


def _dense(aff, extents):
    """A form whose strides its window fills (2*o + k over k < 3): it reads every element of
    its range. A gappy read (a stride-2 1x1 convolution's 2*o) is left to passes/subsample.py."""
    return all(any(u != v and c == 1 and extents[u] >= abs(s) for u, c in aff.items() if u is not None)
               for v, s in aff.items() if v is not None and abs(s) > 1)


def host_epilogue_loads(kernel, by_key, stages, extents):
    """Epilogue loads that read inside the body box of the same tensor (LRN's x[c] at the
    centre of its channel window x[c + j - lo]) leave `by_key` and read that box: one fetch of
    the tensor per tile instead of two. Valid when the body box holds its whole window at the
    epilogue, so the reduce axes it depends on stay untiled: {body key: those axes}."""
    if kernel.combine is None:
        return {}
    red = {a.name for a in kernel.reduce_axes}
    out = {}
    for key in [k for k in by_key if k[1] == "epi" and k[0] not in stages]:
        body = [k for k in by_key if k[0] == key[0] and k[1] == "body"]
        if len(body) != 1:
            continue
        forms = [_affs(kernel, by_key[body[0]], d) for d in range(len(kernel.buffers[key[0]].shape))]
        if all(_inside(affine(x), forms[d], red, extents) for ld in by_key[key] for d, x in enumerate(ld.index)):
            by_key[body[0]] += by_key.pop(key)
            out[body[0]] = frozenset(v for dim in forms for aff in dim for v in aff if v in red and aff[v])
    return out


def _inside(e, forms, red, extents):
    """The epilogue index `e` (no reduce axis) lies in the range of one body form over its
    whole reduce axes, for every tile: equal coefficients, the constant within the window."""
    if e is None or any(v in red and c for v, c in e.items()):
        return False
    for b in forms:
        if any(b.get(v, 0) != e.get(v, 0) for v in set(b) | set(e) if v is not None and v not in red):
            continue
        lo, hi = aff_lohi({v: c for v, c in b.items() if v is None or v in red},
                          {v: (0, extents[v]) for v in b if v in red})
        if lo <= e.get(None, 0) <= hi:
            return True
    return False


def _affs(kernel, loads, d):
    """The distinct affine forms of dim d of the loads' indices."""
    out = []
    for ld in loads:
        aff = affine(ld.index[d])
        if aff is None:
            raise ValueError(f"kernel {kernel.name}: non-affine index {ld.index[d]} of {ld.buf}")
        if aff not in out:
            out.append(aff)
    return out


def _staged_plans(kernel, st, ctx, load_pad, loads, extents, name):
    """The boxes of the producer's inputs that the consumer's loads of a stage need: each
    consumer index composed into the producer's, a window's two ends giving the halo. The
    activation's box (first) computes the stage when it lands; the others (per-element
    constants) are read by it."""
    computed = BoxPlan(st.buf, ctx, None, [_affs(kernel, loads, d) for d in range(len(st.shape))], st.shape, extents,
                       name=name + "p")
    prod = st.producer
    axes = [a.name for a in prod.axes]
    window = {a.name: a.extent for a in prod.reduce_axes}
    plans, names = [], {}
    for j, (src_in, src) in enumerate(st.inputs):
        shape = kernel.buffers[src].shape
        index = [[] for _ in shape]
        pad = None
        for pld in list(iter_loads(prod.body)) + list(iter_loads(prod.epilogue)):
            if pld.buf != src_in:
                continue
            pad = pld.pad
            for d, x in enumerate(pld.index):
                aff = affine(x)
                for ld in loads:
                    base = {None: aff.get(None, 0)}
                    for i, v in enumerate(axes):
                        for u, c in affine(ld.index[i]).items():
                            base[u] = base.get(u, 0) + aff.get(v, 0) * c
                    r = next((v for v in aff if v in window), None)
                    for end in ((0,) if r is None else (0, aff[r] * (window[r] - 1))):
                        a = {u: c for u, c in base.items() if u is None or c}
                        a[None] = a.get(None, 0) + end
                        if a not in index[d]:
                            index[d].append(a)
        pad_dims = ()
        if pad is not None:
            pad_dims = tuple(d for d in range(len(shape)) if (lambda r: r[0] < 0 or r[1] > shape[d] - 1)(
                _full_range(index[d], extents)))
        names[src_in] = f"{name}{'abcdefghijklmnopqrstuvwxyz'[j - 1]}" if j else name
        plans.append(BoxPlan(src, ctx, pad if pad_dims else None, index, shape, extents, name=names[src_in],
                             pad_dims=pad_dims, feeds=name if j else None))
    plans[0].stage = StageBox(st, computed, load_pad, names)
    return plans


def _oob(e, full, size):
    lo, hi = index_range(e, full)
    return lo < 0 or hi > size - 1


# -- constant re-layout (blocking) ------------------------------------------------------

def blockable(b, kernel, graph):
    """Block extents per dim if the box is a tile-aligned block of a constant, else None."""
    if b.context == "out" or b.pad_dims or b.feeds:   # a stage reads it in the plain layout
        return None
    t = graph.tensors.get(kernel.buffers[b.buf].tensor)
    if t is None or t.data is None or not isinstance(t.data, np.ndarray):
        return None
    seen, blocks = set(), []
    for d, affs in enumerate(b.index):
        if len(affs) != 1:
            return None
        aff = affs[0]
        vs = [v for v in aff if v]
        if not vs:
            if aff.get(None, 0) != 0 or b.shape[d] != 1:
                return None
            blocks.append(1)
            continue
        if len(vs) != 1 or aff[vs[0]] != 1 or aff.get(None, 0) != 0 or vs[0] in seen:
            return None
        v = vs[0]
        if b.axis_extents[v] != b.shape[d]:
            return None
        seen.add(v)
        blocks.append(b.tiles[v] if b.tiles else None)
    return tuple(blocks)


def blocked_array(data, shape, blocks):
    """The tensor re-laid out as [grid dims..., block dims...], zero padded to whole blocks.
    Without padding it is a strided view of `data`, not a copy: the blob writer copies it out
    piece by piece (backends/blob.py), so vgg16's 400 MB fc6 is never held twice."""
    a = np.asarray(data).reshape(shape)
    grid = [-(-s // k) for s, k in zip(shape, blocks)]
    pad = [(0, g * k - s) for g, k, s in zip(grid, blocks, shape)]
    if any(p[1] for p in pad):
        a = np.pad(a, pad)
    inter = []
    for g, k in zip(grid, blocks):
        inter += [g, k]
    a = a.reshape(inter)
    nd = len(shape)
    a = a.transpose([2 * i for i in range(nd)] + [2 * i + 1 for i in range(nd)])
    return a, grid


def apply_blocking(kernel, graph, boxes, tiles):
    """Re-lay out constant boxes that would otherwise need strided or repeated DMAs."""
    users = {}
    for b in boxes:
        users.setdefault(b.buf, []).append(b)
    for b in boxes:
        if len(users[b.buf]) != 1 or b.merge <= 1:
            continue
        blocks = blockable(b, kernel, graph)
        if blocks is None:
            continue
        src = graph.tensors[kernel.buffers[b.buf].tensor]
        if is_splat(src.data):     # one value everywhere: the blocked tensor is a splat too
            grid = [-(-n // k) for n, k in zip(b.shape, blocks)]
            arr = np.broadcast_to(np.asarray(src.data).reshape(-1)[0], tuple(grid) + tuple(blocks))
        else:
            arr, grid = blocked_array(src.data, b.shape, blocks)
        name = f"%swblk:{kernel.name}:{b.buf}"
        graph.tensors[name] = Tensor(name, tuple(arr.shape), src.dtype,
                                     arr if is_splat(arr) else arr.astype(src.dtype, copy=False))
        kernel.buffers[b.buf] = replace(kernel.buffers[b.buf], tensor=name)
        b.blocked, b.block_tensor = tuple(blocks), name
        b.notes.append(f"constant re-laid out in blocks {list(blocks)} (grid {grid})")


def block_grid(b):
    return [-(-s // k) for s, k in zip(b.shape, b.blocked)]

