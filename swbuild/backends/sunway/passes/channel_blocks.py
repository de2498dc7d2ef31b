"""Option `channel_blocks` (Sunway): model-internal activations stored [N][C/8][H][W][8].

In NCHW a tile moves one run per channel (its rows of that channel), short on small images;
with 8 channels innermost, 8 channels of a tile are one run. Every kernel that touches such
a tensor has the axis that indexes its channels split into a block axis and a lane axis of 8
(x = x_b * 8 + x_l; a split output axis puts its lane innermost, a split reduce axis its lane
last of the reduce axes), and a constant it reads along a split axis (the weights) is re-laid
out with the lanes innermost, the output's lane last, so the SIMD micro-kernels run along the
lanes with the weights contiguous (without that layout the micro-kernels gather the weights:
docs/grouping.md, stop 29).

Which tensors are blocked is the predictor's choice (`on`): in reverse program order, a
tensor is blocked when every kernel touching it can take it and, each run alone through the
scheduling passes, they model faster (each kernel as flat_pixels, the next pass, then keeps
it: with one pixel axis where that models faster); `all` blocks whatever the kernels can take.
The trials' seconds are memoised by search signature and their misses run in the parallel
tile search's workers (schedule/parallel.py), as flat_pixels' and vector_weights' do.

A Concat container and the parts written in place inside it are blocked together, when
every part starts on an 8-channel boundary (batch 1). Graph inputs and outputs, tensors with
views (reshapes), loop slices, tensors of special kernels or static loops, and channel counts
that are not a multiple of 8 stay NCHW. A kernel cannot take a blocked tensor whose channel
index is not one axis plus a multiple of 8, nor one it reads along an output axis while its
own output stays NCHW. Sizes do not change, so the arena does not.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Axis, Load, Var, affine, iconst, iter_loads, transform
from ..schedule import parallel
from ..schedule.ldm import pending_seconds
from ..schedule.passes import drop_unused_constants, drop_untaken
from . import flat_pixels
from . import trial_seconds
from .trial_seconds import KernelSeconds

LANES = 8
MAX_TRIAL_UNITS = 4     # a kernel touching more units has its layouts tried in the process only


def _units(program):
    """The tensors that may be blocked, as units blocked together: one tensor, or a Concat
    container with the parts written in place inside it (their bytes are its bytes, so all
    of them change layout or none)."""
    cand = _candidates(program)
    g = program.graph
    touched = {program.root(b.tensor) for k in program.kernels for b in k.buffers.values()}
    group = {}
    for x in program.slices:            # parts, nested ones too, join their outermost container
        top, off = program.root(x), 0
        while top in program.slices:
            c, d = program.slices[top]
            top, off = program.root(c), off + d
        group.setdefault(top, {top: 0})[program.root(x)] = off
    units = [frozenset([t]) for t in sorted(cand - {t for grp in group.values() for t in grp})]
    for top, members in sorted(group.items()):
        n, c, h, w = g.tensors[top].shape if len(g.tensors[top].shape) == 4 else (0, 0, 0, 0)
        plane = h * w * np.dtype(g.tensors[top].dtype).itemsize if n == 1 else 0
        if plane and all((t in cand or _bare(program, t, touched)) and g.tensors[t].shape[2:] == (h, w)
                         and off % (plane * LANES) == 0 for t, off in members.items()):
            units.append(frozenset(members))
    return units


def _bare(program, t, touched):
    """A container no kernel reads or writes as a whole (merge_siblings' tensor holding the
    merged output and the Concat after it): only its parts' layout decides, if it is 4-D with
    whole blocks of channels and no graph input, output or view."""
    g = program.graph
    fixed = {program.root(x) for x in list(program.inputs) + list(program.outputs)}
    viewed = {program.root(a) for a in program.aliases}
    shape = g.tensors[t].shape
    return (t not in touched and t not in fixed | viewed and g.tensors[t].data is None and len(shape) == 4
            and shape[1] % LANES == 0)


def _candidates(program):
    g = program.graph
    fixed = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    viewed = {program.root(a) for a in program.aliases}
    # a loop slice is bytes of its container, which the host indexes by iteration
    parts = {program.root(t) for t in program.loop_slices}
    parts |= {program.root(s.container) for s in program.loop_slices.values()}
    out, bad = set(), fixed | viewed | parts
    for k in program.kernels:
        for b in k.buffers.values():
            r = program.root(b.tensor)
            t = g.tensors.get(r)
            if t is None or t.data is not None:
                continue
            if b.tensor != r or tuple(b.shape) != tuple(t.shape) or len(t.shape) != 4 or t.shape[1] % LANES:
                bad.add(r)
            else:
                out.add(r)
    return out - bad


def _channel(e, ext):
    """(lane var, {var: coef // 8}, const // 8) when e = x + (multiples of 8), x an axis of
    extent a multiple of 8, else None."""
    a = affine(e)
    if a is None or a.get(None, 0) % LANES:
        return None
    lanes = [v for v, c in a.items() if v is not None and c == 1 and ext.get(v, 1) % LANES == 0]
    if len(lanes) != 1 or any(c % LANES for v, c in a.items() if v not in (None, lanes[0])):
        return None
    x = lanes[0]
    return x, {v: c // LANES for v, c in a.items() if v not in (None, x)}, a.get(None, 0) // LANES


def _plan(program, k, cand):
    """The axes to split in k ({name: "spatial" | "reduce"}) and each converted load's channel
    decomposition, or None when k cannot take them."""
    if k.kind != "compute" or k.loop is not None or any(k.out_offset) or k.stages:
        return None     # a stitched kernel's stages (computed in LDM) read in NCHW: _rewrite leaves them
    ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    red = {a.name for a in k.reduce_axes}
    split, chans = {}, {}
    out_blocked = program.root(k.buffers[k.out].tensor) in cand
    if out_blocked:
        if len(k.axes) != 4 or k.axes[1].extent % LANES:
            return None
        split[k.axes[1].name] = "spatial"
    for e in (k.body, k.epilogue):
        for ld in iter_loads(e):
            if program.root(k.buffers[ld.buf].tensor) not in cand:
                continue
            c = _channel(ld.index[1], ext)
            if c is None or any(v in split for v in c[1]):
                return None
            x = c[0]
            kind = "reduce" if x in red else "spatial"
            if kind == "spatial" and not (out_blocked and x == k.axes[1].name):
                return None       # an output axis splits only where the output is blocked too
            split[x] = kind
            chans[ld] = c
    for ld, (x, others, _) in chans.items():
        if any(v in split for v in others):
            return None
    names = set(ext)
    if any(f"{x}_b" in names or f"{x}_l" in names for x in split):
        return None
    return split, chans


def _relaid_constant(program, k, buf, index, split, order):
    """A copy of constant `buf` with every dim indexed by a split axis cut into block and
    lane, the lanes innermost in `order`: (tensor name, shape, index), or None. The copy is
    named by kernel, buffer and split axes, so every variant of a kernel has its own."""
    b = k.buffers[buf]
    t = program.graph.tensors[program.root(b.tensor)]
    dims = [i for i, e in enumerate(index) if isinstance(e, Var) and e.name in split]
    if not dims or b.tensor != program.root(b.tensor) or tuple(b.shape) != tuple(t.shape):
        return None
    dims.sort(key=lambda i: order.index(index[i].name))
    name = f"%swcb:{k.name}:{buf}:{'.'.join(index[i].name for i in dims)}"
    shape, lane_dims = [], {}
    for i, n in enumerate(b.shape):
        if i in dims:
            shape += [n // LANES, LANES]
            lane_dims[i] = len(shape) - 1
        else:
            shape.append(n)
    perm = [j for j in range(len(shape)) if j not in lane_dims.values()] + [lane_dims[i] for i in dims]
    if name not in program.graph.tensors:
        data = np.broadcast_to(np.asarray(t.data), t.shape)
        arr = np.ascontiguousarray(data.reshape(shape).transpose(perm))
        program.graph.tensors[name] = Tensor(name, tuple(arr.shape), t.dtype, arr)
    new = [Var(f"{e.name}_b") if i in dims else e for i, e in enumerate(index)]
    return name, program.graph.tensors[name].shape, tuple(new) + tuple(Var(f"{index[i].name}_l") for i in dims)


def _blocked(b):
    """Buffer b ([N][C][H][W]) viewed [N][C/8][H][W][8]."""
    n, c, h, w = b.shape
    return replace(b, shape=(n, c // LANES, h, w, LANES))


def _rewrite(program, k, split, chans, blocked):
    """k with its split axes cut into blocks and lanes, the blocked tensors it touches indexed
    [N][C/8][H][W][8] and the constants it reads along split axes re-laid out to match."""
    sub = {x: Var(f"{x}_b") * iconst(LANES) + Var(f"{x}_l") for x in split}
    # lanes innermost in this order: the reduce axes' first, the output's last (SIMD runs along it)
    order = [x for x, kind in split.items() if kind == "reduce"] + [x for x, kind in split.items() if kind == "spatial"]
    bufs = dict(k.buffers)

    def plain(e):
        return transform(e, lambda x: sub.get(x.name) if isinstance(x, Var) else None)

    const_index = {}
    for e in (k.body, k.epilogue):
        for ld in iter_loads(e):
            if program.graph.tensors[program.root(k.buffers[ld.buf].tensor)].data is not None:
                const_index.setdefault(ld.buf, set()).add(ld.index)
    relaid = {}
    for buf, idx in sorted(const_index.items()):
        r = _relaid_constant(program, k, buf, next(iter(idx)), split, order) if len(idx) == 1 else None
        if r is not None:
            relaid[buf] = r
            bufs[buf] = replace(bufs[buf], tensor=r[0], shape=r[1])

    def fix(e):
        if isinstance(e, Var) and e.name in sub:
            return sub[e.name]
        if not isinstance(e, Load):
            return None
        if e.buf in relaid:               # its one index pattern, on the re-laid copy
            return Load(e.buf, tuple(plain(i) for i in relaid[e.buf][2]), e.pad)
        if e in chans:
            x, others, const = chans[e]
            blk = Var(f"{x}_b")
            for v, c in sorted(others.items()):
                blk = blk + Var(v) * iconst(c)
            if const:
                blk = blk + iconst(const)
            bufs[e.buf] = _blocked(k.buffers[e.buf])
            i = e.index
            return Load(e.buf, (plain(i[0]), blk, plain(i[2]), plain(i[3]), Var(f"{x}_l")), e.pad)
        return None

    body, epilogue = transform(k.body, fix), transform(k.epilogue, fix)
    axes, lanes_out = list(k.axes), []
    for j, a in enumerate(axes):
        if split.get(a.name) == "spatial":
            axes[j] = Axis(f"{a.name}_b", a.extent // LANES)
            lanes_out.append(Axis(f"{a.name}_l", LANES))
    red = [Axis(f"{a.name}_b", a.extent // LANES) if split.get(a.name) == "reduce" else a for a in k.reduce_axes]
    red += [Axis(f"{x}_l", LANES) for x in order if split[x] == "reduce"]
    if program.root(k.buffers[k.out].tensor) in blocked:
        bufs[k.out] = _blocked(k.buffers[k.out])
    axes += lanes_out
    return replace(k, axes=tuple(axes), reduce_axes=tuple(red), body=body, epilogue=epilogue, buffers=bufs,
                   out_offset=(0,) * len(axes))


class Variants(KernelSeconds):
    """Each kernel's modelled seconds with a given set of its tensors blocked (None where it
    cannot take them): the kernel alone through the scheduling passes, then the predictor,
    as the build would model it. Repeated layers share their tile searches (ldm.py) and their
    seconds (trial_seconds.py)."""

    def __init__(self, program, target, options):
        super().__init__(program, target, options)
        # the tensors (roots) each kernel reads or writes
        self.touched = {k.name: {program.root(b.tensor) for b in k.buffers.values()} for k in program.kernels}
        self.memo = {}

    def get(self, k, blocked):
        """(modelled seconds, rewritten kernel), or None."""
        key = (k.name, frozenset(blocked & self.touched[k.name]))
        if key not in self.memo:
            kb = self.kernel(k, key[1])
            self.memo[key] = None if kb is None else (min(self._seconds(w) for w in self.ways(kb)), kb)
        return self.memo[key]

    def ways(self, kb):
        """kb and what flat_pixels, which runs next, may make of it (one pixel axis, where that
        models faster): a layout is judged by the kernel the build then keeps."""
        pair = flat_pixels.candidate(kb) if flat_pixels.enabled(self.p, self.options) else None
        return [kb] if pair is None else [kb, flat_pixels.merged(kb, *pair)]

    def kernel(self, k, blocked):
        """k rewritten for the blocked tensors it touches, or None when it cannot take them."""
        blocked = blocked & self.touched[k.name]
        if not blocked:
            return k
        key = ("kernel", k.name, frozenset(blocked))
        if key not in self.memo:
            plan = _plan(self.p, k, blocked)
            self.memo[key] = None if plan is None else _rewrite(self.p, k, *plan, blocked)
        return self.memo[key]


class _Trial:
    """One layout of one kernel (the blocked tensors it touches) as a parallel search item."""

    def __init__(self, variants, k):
        self.k, self.variants = k, variants
        self.s, self.key = variants.search(k)

    def work(self):
        return pending_seconds((self.s,))


def _prefetch(program, variants, units):
    """Every layout choose_blocked may model, each kernel with each union of the units it
    touches (at most 2**MAX_TRIAL_UNITS), handed to the parallel search's workers: the misses
    of trial_seconds._SECONDS by search signature, repeated layers once. The pass then decides in order from
    the memo, the same bytes with one worker or many."""
    trials = []
    for k in program.kernels:
        mine = [u for u in units if u & variants.touched[k.name]]
        if not mine or len(mine) > MAX_TRIAL_UNITS:
            continue
        for bits in range(1 << len(mine)):
            blocked = frozenset().union(*(u for j, u in enumerate(mine) if bits >> j & 1))
            kb = variants.kernel(k, blocked)
            if kb is not None:
                trials += [_Trial(variants, w) for w in variants.ways(kb)]
    parallel.prefetch_trials(lambda t: t.variants._seconds(t.k), trials, trial_seconds._SECONDS, _Trial.work)


def choose_blocked(program, variants, units, by_cost=True):
    """Tensors to block: unit by unit (_units), in reverse program order of their writers (a
    consumer's output is decided before its input, which may need it), a unit is blocked when
    every kernel touching it can take it and their modelled seconds fall (`by_cost=False`,
    option value `all`: whenever they can take it)."""
    writer = {}
    for i, k in enumerate(program.kernels):
        writer.setdefault(program.root(k.buffers[k.out].tensor), i)
    blocked = set()
    touched = variants.touched
    for u in sorted(units, key=lambda u: (-max(writer.get(t, -1) for t in u), sorted(u))):
        touching = [k for k in program.kernels if touched[k.name] & u]
        trial = blocked | u
        if not by_cost:
            if all(_plan(program, k, trial & touched[k.name]) is not None for k in touching):
                blocked = trial
            continue
        before = [variants.get(k, blocked) for k in touching]
        after = [variants.get(k, trial) for k in touching]
        if any(v is None for v in before + after):
            continue
        if sum(v[0] for v in after) < sum(v[0] for v in before):
            blocked = trial
    return blocked


def channel_blocks(program, target, options):
    """Option `channel_blocks`: activations in 8-channel blocks where the kernels then model faster.

    `on`: where the predictor models the kernels touching a tensor faster; `all`: wherever
    they can take it (module doc)."""
    mode = str((options or {}).get("channel_blocks", "off")).lower()
    if mode not in ("on", "all"):
        return program
    before = set(program.graph.tensors)
    consts = {program.root(b.tensor) for k in program.kernels for b in k.buffers.values()
              if program.graph.tensors[program.root(b.tensor)].data is not None}
    variants = Variants(program, target, options)
    units = _units(program)
    if mode == "on":
        _prefetch(program, variants, units)
    blocked = choose_blocked(program, variants, units, by_cost=mode == "on")
    for i, k in enumerate(program.kernels):
        if variants.touched[k.name] & blocked:
            program.kernels[i] = variants.kernel(k, blocked)
    drop_untaken(program, before)     # copies of variants not taken
    drop_unused_constants(program, consts)       # originals every reader now reads re-laid out
    program.target_state.channel_blocks = sorted(blocked)
    return program
