"""Strided reads of an activation made dense by a copy kernel (Sunway): `x[..., s*i, s*j]`.

A stride-2 1x1 convolution (ResNet's downsampling branch) reads every other column of its
input. A DMA run is contiguous, so its input box carries the skipped columns: a tile of 7
output columns on 14x14 pixels moves runs of 13 floats, of which 7 are used, and short runs
are slow (toolchains' dma_curve). Here such a kernel may read instead a dense copy of what it
uses, `z[..., i, j] = x[..., s*i, s*j]`, written by a copy kernel just before it: the copy
reads the strided rows once, the kernel's boxes become long runs (a whole 7x7 plane of a
channel is one run). Only where the cost model says the pair (its two tile searches, plus a
kernel launch) is faster than the kernel alone.

The trials search tiles, so they run like the tile searches (schedule/parallel.py): decisions
are memoised by the kernel's search signature and the kernels that would miss the memo are
first handed to the worker processes. Runs before the memory plan, which places the copies.
"""
from __future__ import annotations

from dataclasses import replace

from ....config.recipe import option_on
from ....ir.graph import Tensor
from ....ir.loopnest import Axis, Bin, Buffer, Const, Kernel, Load, Select, Var, affine, iconst, iter_loads, transform
from ..cost import model
from ..schedule import parallel
from ..schedule.ldm import Search, ldm_budget, pending_seconds, search_tiles, signature
from ..schedule.passes import drop_untaken


def _strided(k, ext):
    """The one activation load of k's body read at a stride along some dims: (load, per dim
    (axis name, stride) or None where the dim is read whole by a plain axis), else None."""
    if k.kind != "compute" or k.loop is not None or k.stages or k.combine != "sum":
        return None
    loads = {}
    for e in (k.body, k.epilogue):
        for ld in iter_loads(e):
            loads.setdefault(ld.buf, set()).add(ld)
    out = None
    for buf, lds in sorted(loads.items()):
        if len(lds) != 1 or buf == k.out:
            continue
        ld = next(iter(lds))
        b = k.buffers[buf]
        if ld.pad is not None or len(ld.index) != len(b.shape):
            continue
        dims, ok = [], True
        for e, n in zip(ld.index, b.shape):
            if isinstance(e, Var) and ext.get(e.name) == n:
                dims.append(None)               # read whole: copied whole
                continue
            a = affine(e)
            vs = {v: c for v, c in (a or {}).items() if v is not None and ext.get(v, 1) > 1}
            if a is None or a.get(None, 0) != 0 or len(vs) != 1:
                ok = False
                break
            (v, c), = vs.items()
            if c > 1 and c * ext[v] <= n:      # the copy reads rows s*i .. s*i + s-1
                dims.append((v, c))
            else:
                ok = False
                break
        if ok and any(dims) and out is None:
            out = (ld, dims)
        elif ok and any(dims):
            return None                         # two strided loads: left alone
    return out


def _pair(program, k):
    """(copy kernel, k reading the copy), the copy's tensor added to the graph; or None."""
    ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    found = _strided(k, ext)
    if found is None:
        return None
    ld, dims = found
    src = k.buffers[ld.buf]
    g = program.graph
    t = g.tensors.get(program.root(src.tensor))
    if t is None or t.data is not None or src.dtype != "float32":
        return None     # constants are re-laid out at compile time anyway; the copy is a float32 sum
    shape = tuple(n if d is None else ext[d[0]] for n, d in zip(src.shape, dims))
    name = f"%swsub:{k.name}"
    if name not in g.tensors:
        g.tensors[name] = Tensor(name, shape, src.dtype)
    axes = tuple(Axis(f"d{i}", n) for i, n in enumerate(shape))
    # reads x[.., s*i + r, ..] for every r < s and keeps r = 0: its boxes span whole rows and
    # planes (one DMA run), not the skipped columns' bounding box (13 of 14 floats a run)
    red = tuple(Axis(f"r{i}", d[1]) for i, d in enumerate(dims) if d is not None)
    index = tuple(Var(a.name) if d is None else Var(a.name) * iconst(d[1]) + Var(f"r{i}")
                  for i, (a, d) in enumerate(zip(axes, dims)))
    keep = None
    for r in red:
        c = Bin("==", r.var, iconst(0))
        keep = c if keep is None else Bin("and", keep, c)
    body = Select(keep, Load("b0", index), Const(0.0))
    copy = Kernel(f"{k.name}_sub", k.op, k.node, "b1", axes, body,
                  {"b0": replace(src, name="b0"), "b1": Buffer("b1", name, shape, src.dtype)},
                  reduce_axes=red, combine="sum", init=0.0)

    def dense(e):
        if isinstance(e, Load) and e.buf == ld.buf:
            return Load(e.buf, tuple(i if d is None else _unstride(i, d[0]) for i, d in zip(e.index, dims)), e.pad)
        return None
    bufs = dict(k.buffers)
    bufs[ld.buf] = replace(src, tensor=name, shape=shape)
    return copy, replace(k, body=transform(k.body, dense), epilogue=transform(k.epilogue, dense), buffers=bufs)


def _unstride(e, v):
    """`c*v + w` (w: axes of extent 1, always 0) as `v + w`."""
    out = Var(v)
    for w, c in sorted((w, c) for w, c in affine(e).items() if w not in (None, v)):
        out = out + (Var(w) if c == 1 else Var(w) * iconst(c))
    return out


GAIN = 1.0      # the pair must model faster than the kernel alone, a launch included

_DECISIONS = {}     # ("subsample",) + the kernel's search signature -> True: the copy pays
parallel.MEMOS.append(lambda: _DECISIONS)      # workers send decisions back with the tiles


class _Trial:
    def __init__(self, program, target, options, k, pair):
        hw, budget = target.hardware, ldm_budget(target, options)
        self.k, self.pair, self.hw = k, pair, hw
        self.s = Search(k, hw, budget, options, program.graph, target.sha256)
        self.ss = [Search(x, hw, budget, options, program.graph, target.sha256) for x in pair]
        self.key = ("subsample",) + signature(self.s)

    def work(self):
        """Estimated seconds of the trial: the searches whose tiles are not known yet."""
        return pending_seconds([self.s] + self.ss)


def _decide(t):
    if t.key not in _DECISIONS:
        alone = t.s.evaluate(search_tiles(t.s))[0]
        pair = sum(s.evaluate(search_tiles(s))[0] for s in t.ss) + float(model.hwget(t.hw, "spawn_seconds"))
        _DECISIONS[t.key] = pair < GAIN * alone
    return _DECISIONS[t.key]


def subsample_inputs(program, target, options):
    """Option `subsample`: strided activation reads from a dense copy where the pair models faster.

    The copy kernel and the kernel reading it replace the kernel (module doc)."""
    if not option_on(options, "subsample") or program.graph is None:
        return program
    before = set(program.graph.tensors)
    trials = {}
    for i, k in enumerate(program.kernels):
        pair = _pair(program, k)
        if pair is not None:
            trials[i] = _Trial(program, target, options, k, pair)
    parallel.prefetch_trials(_decide, trials.values(), _DECISIONS, _Trial.work)
    out = []
    for i, k in enumerate(program.kernels):
        if i in trials and _decide(trials[i]):
            out += trials[i].pair
            program.notes.append(f"{k.name}: strided input read from a dense copy ({trials[i].pair[0].name})")
        else:
            out.append(k)
    program.kernels = out
    drop_untaken(program, before)     # copies not taken
    return program
