"""Two spatial axes merged into one where every access reads them as a row-major pair.

A 1x1 stride-1 convolution reads X[n, ci, o0, o1] and writes Y[n, co, o0, o1] (its bias, a
residual, likewise): the pixels are one contiguous run per channel, but as two axes its
tiles are rectangles of whole rows, so on 28x28 or 14x14 pixels no axis has 8 (or 64)
tiles for a mesh row (column) to split, register blocks are cut at row ends, and a tile's
DMA runs stop at its rows. Here such a kernel gets one pixel axis p = o0 * W + o1 over views
of the same tensors ([n, ci, H*W]: the same bytes, row-major), so a tile is any run of
pixels: 784 pixels in 8 tiles of 98 (2-D sharing, schedule/grid.py), or whole planes.

A kernel is merged only where the predictor models it faster, the kernel run alone through
the scheduling passes both ways; each way's modelled seconds are memoised by its search
signature, and the misses are handed to the workers of the parallel tile search (as
vector_weights' trials are).
Axes of extent 1 in the reduction (a 1x1 window's kh, kw) are 0 in every index.
"""
from __future__ import annotations

from dataclasses import replace

from ....config.recipe import option_on
from ....ir.loopnest import Axis, Load, Var, affine, iter_loads, transform
from ..schedule import parallel
from ..schedule.ldm import Search, ldm_budget, pending_seconds, signature
from .trial_seconds import KernelSeconds


def _pair_dims(ld, a, b, ones):
    """The dim d where load `ld` reads axis a at d and b at d + 1 (each plainly, plus only axes
    of extent 1), and no other dim uses either; None if it reads neither; False otherwise."""
    uses = []
    for d, e in enumerate(ld.index):
        f = affine(e)
        if f is None:
            return False
        vs = {v for v, c in f.items() if v and c}
        if vs & {a, b}:
            uses.append((d, vs - ones, f))
    if not uses:
        return None
    if len(uses) != 2 or ld.pad is not None:
        return False
    (d0, v0, f0), (d1, v1, f1) = uses
    if d1 != d0 + 1 or v0 != {a} or v1 != {b} or f0[a] != 1 or f1[b] != 1 or f0.get(None) or f1.get(None):
        return False        # each read plainly: no stride, flip or offset
    return d0


def candidate(k):
    """(a, b): consecutive spatial axes of k every load and its output read as a row-major pair
    of dims (the second dim's extent that of b), or None."""
    if k.kind != "compute" or k.loop is not None or k.stages or len(k.axes) < 2:
        return None
    ones = {x.name for x in k.reduce_axes if x.extent == 1}
    loads = [ld for e in (k.body, k.epilogue) for ld in iter_loads(e)]
    for i in range(len(k.axes) - 1, 0, -1):
        a, b = k.axes[i - 1], k.axes[i]
        if a.extent == 1 or b.extent == 1 or k.out_offset[i - 1] or k.out_offset[i]:
            continue
        if k.buffers[k.out].shape[i] != b.extent:
            continue
        dims = {k.out: {i - 1}}     # each buffer viewed one way: its pair at one dim
        for ld in loads:
            d = _pair_dims(ld, a.name, b.name, ones)
            if d is False or (d is not None and k.buffers[ld.buf].shape[d + 1] != b.extent):
                break
            if d is not None:
                dims.setdefault(ld.buf, set()).add(d)
        else:
            if all(len(v) == 1 for v in dims.values()):
                return a.name, b.name
    return None


def merged(k, a, b):
    """k with axes a, b (consecutive) as one axis `a` of extent a * b, over views whose two
    dims are one (candidate's loads)."""
    i = [x.name for x in k.axes].index(a)
    ext = k.axes[i].extent * k.axes[i + 1].extent
    ones = {x.name for x in k.reduce_axes if x.extent == 1}
    views = {}

    def view(buf, d):
        shp = k.buffers[buf].shape
        views[buf] = replace(k.buffers[buf], shape=shp[:d] + (shp[d] * shp[d + 1],) + shp[d + 2:])

    view(k.out, i)

    def fix(e):
        if isinstance(e, Load):
            d = _pair_dims(e, a, b, ones)
            if d is None:
                return None
            view(e.buf, d)
            return Load(e.buf, tuple(transform(x, fix) for x in e.index[:d]) + (Var(a),)
                        + tuple(transform(x, fix) for x in e.index[d + 2:]), e.pad)
        return None
    body, epi = transform(k.body, fix), transform(k.epilogue, fix)
    axes = k.axes[:i] + (Axis(a, ext),) + k.axes[i + 2:]
    off = k.out_offset[:i + 1] + k.out_offset[i + 2:]
    return replace(k, axes=axes, body=body, epilogue=epi, out_offset=off, buffers={**k.buffers, **views})


_SECONDS = {}       # ("flat_pixels",) + a variant's search signature -> its modelled seconds
parallel.MEMOS.append(lambda: _SECONDS)        # workers send them back with the tiles


class _Variant:
    """One way of a candidate kernel (as it is, or merged) and its search (memo key, work)."""

    def __init__(self, program, target, options, k):
        self.k = k
        self.s = Search(k, target.hardware, ldm_budget(target, options), options, program.graph, target.sha256)
        self.key = ("flat_pixels",) + signature(self.s)

    def work(self):
        """Estimated seconds: its search, unless its tiles are known."""
        return pending_seconds((self.s,))


def _seconds(v, variants):
    """The variant's modelled seconds, the kernel alone through the scheduling passes: memoised."""
    if v.key not in _SECONDS:
        _SECONDS[v.key] = variants._seconds(v.k)
    return _SECONDS[v.key]


def enabled(program, options):
    """Whether the pass runs: not with option mesh_gemm, whose mesh kernels (passes/mesh.py)
    take 1x1 convolutions as they are."""
    return program.graph is not None and not option_on({"mesh_gemm": options.get("mesh_gemm", "off")}, "mesh_gemm")


def flat_pixels(program, target, options):
    """One pixel axis for a row-major pair of spatial axes (1x1 convolutions) where it models faster.

    Two spatial axes every access reads as a row-major pair become one (module doc). Both ways of every candidate are handed to the parallel
    search's workers, a trial's two searches apart."""
    if not enabled(program, options):
        return program
    variants = KernelSeconds(program, target, options)
    trials = {}
    for i, k in enumerate(program.kernels):
        pair = candidate(k)
        if pair is not None:
            trials[i] = tuple(_Variant(program, target, options, x) for x in (k, merged(k, *pair)))
    parallel.prefetch_trials(lambda v: _seconds(v, variants), [v for t in trials.values() for v in t], _SECONDS,
                             _Variant.work)
    for i, (v, vm) in trials.items():
        if _seconds(vm, variants) < _seconds(v, variants):
            program.kernels[i] = vm.k
    return program
