"""A 1x1 convolution scheduled as SUMMA over the 8x8 mesh (SW26010 register communication).

The kernel is a GEMM per image: Y[co, p] = epilogue(sum_ci W[co, ci] * X[ci, p]), p the
H*W pixels (stride 1, no pads, one group, NCHW). CPE (r, c) keeps the accumulators of
rows [co0 + r*mc, +mc) and pixels [p0 + c*pc, +pc) of an output tile in its LDM. Per co
tile it fetches its own pieces of W: W[r-block, the c-th kc-slice of every k step] (nk
strided gets, resident over the tile; W is re-laid out at compile time so that they are one DMA,
`mesh_weights`). Per k step of 8*kc input channels it fetches its
piece of X, X[the r-th kc-slice, c-block], then 8 sub-steps s: CPE (r, s) broadcasts its W
piece along the row (putr, destination 8) and CPE (s, c) its X piece along the column
(putc); every CPE multiplies what it received (SUMMA; docs/grouping.md). So W and X are read
from memory once per (co tile, p tile) and per co tile, and the other 7/8 of what a CPE
multiplies arrives by 32-byte messages.

A row's sender changes at every sub-step; the next sender received the previous one's last
message before it puts (it was its receiver), so the emulator's ordering rule holds; the
row phase of a sub-step finishes before its column phase on every CPE, so no buffer depth
deadlocks (a phase only waits on CPEs of its own or an earlier phase).

Cost (`mesh_seconds`): the CPEs run in lock step, so each phase costs its slowest CPE: a
message `regcomm_message_cycles` (toolchain, sourced), plus `regcomm_latency_cycles` per
phase; DMA at the core group's curve per CPE (cost/model.py), not overlapped; the inner loop
a register-blocked micro-kernel (`micro_cycles`: ROWS output channels x VECS vectors of 4
pixels in registers over the kc slice, each X vector loaded once, unaligned, for the ROWS). `mesh_counts` gives the exact DMA and message counts the emulator measures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ....ir.graph import Tensor
from ....ir.loopnest import Acc, Bin, Const, Load, Un, affine, iter_loads
from ..cost import model
from ..cost.predict import compulsory_bytes
from ..schedule import simd
from ..schedule.kernel_schedule import ldm_align
from .gather import FixedSchedule

MESH = 8            # CPEs per mesh row and column
MSG_FLOATS = 8      # one 256-bit message


@dataclass(frozen=True)
class GemmShape:
    """The buffers and extents of a 1x1 convolution read as a GEMM per image."""
    N: int
    CO: int
    CI: int
    P: int
    x: str                    # activation [N, CI, H, W]
    w: str                    # weights [CO, CI, 1, 1]
    y: str                    # output [N, CO, H, W]
    vecs: tuple = ()          # epilogue buffers indexed by co alone, contiguous along it
    res: tuple = ()           # epilogue buffers indexed like the output (a residual)


def _vars(e):
    a = affine(e)
    return None if a is None else {k: v for k, v in a.items() if k is not None and v}


def gemm_shape(k, graph=None):
    """GemmShape of a kernel this schedule can run, else (None, why)."""
    if k.kind != "compute" or k.combine != "sum" or k.init != 0.0 or k.stages or k.loop is not None:
        return None, "not a plain sum reduction"
    if any(k.out_offset) or len(k.axes) != 4 or len(k.reduce_axes) != 3:
        return None, "not a 4-d convolution writing a whole tensor"
    n, co, o0, o1 = (a.name for a in k.axes)
    ci, r0, r1 = k.reduce_axes
    if r0.extent != 1 or r1.extent != 1:
        return None, "not a 1x1 window"
    body = k.body
    if not (isinstance(body, Bin) and body.op == "*" and isinstance(body.a, Load) and isinstance(body.b, Load)):
        return None, "the body is not one product of two loads"
    want_x = [{n: 1}, {ci.name: 1}, {o0: 1, r0.name: 1}, {o1: 1, r1.name: 1}]
    want_w = [{co: 1}, {ci.name: 1}, {r0.name: 1}, {r1.name: 1}]
    x = w = None
    for ld in (body.a, body.b):
        idx = [_vars(e) for e in ld.index]
        consts = [affine(e) for e in ld.index]
        if ld.pad is not None or any(c is None or c.get(None, 0) for c in consts):
            return None, "an index with an offset or pads"
        if idx == want_x:
            x = ld
        elif idx == want_w:
            w = ld
    if x is None or w is None or x.buf == w.buf:
        return None, "the loads are not X[n, ci, h, w] and W[co, ci, 0, 0]"
    N, CO, H, W = (a.extent for a in k.axes)
    CI = ci.extent
    if tuple(k.buffers[x.buf].shape) != (N, CI, H, W) or tuple(k.buffers[w.buf].shape) != (CO, CI, 1, 1) \
            or tuple(k.buffers[k.out].shape) != (N, CO, H, W):
        return None, "a buffer is not the whole tensor (stride, slice or pads)"
    wt = graph.tensors.get(k.buffers[w.buf].tensor) if graph is not None else None
    if wt is None or wt.data is None:
        return None, "the weights are not a constant"
    if any(k.buffers[b].dtype != "float32" for b in (x.buf, w.buf, k.out)):
        return None, "not float32"
    vecs, res = [], []
    for ld in iter_loads(k.epilogue):
        b = k.buffers[ld.buf]
        flat = flat_offsets(ld, b.shape)
        if ld.pad is not None or flat is None or b.dtype != "float32":
            return None, f"epilogue load {ld.buf} is not affine"
        # where it reads in its tensor, as a function of the output point
        if flat == {n: CO * H * W, co: H * W, o0: W, o1: 1} and math.prod(b.shape) == N * CO * H * W:
            res.append(ld.buf)
        elif flat == {co: 1}:
            vecs.append(ld.buf)
        else:
            return None, f"epilogue load {ld.buf} is neither per output channel nor a residual"
    if not _epilogue_ok(k.epilogue):
        return None, "an epilogue operation the mesh printer has no rule for"
    return GemmShape(N, CO, CI, H * W, x.buf, w.buf, k.out, tuple(dict.fromkeys(vecs)), tuple(dict.fromkeys(res))), ""


def flat_offsets(ld, shape):
    """{var: coefficient} of the element offset a load reads (constants included under None,
    dropped when 0), or None when not affine."""
    out = {}
    pitch = 1
    for e, ext in reversed(list(zip(ld.index, shape))):
        a = affine(e)
        if a is None:
            return None
        for v, c in a.items():
            out[v] = out.get(v, 0) + c * pitch
        pitch *= ext
    return {v: c for v, c in out.items() if c}


def _epilogue_ok(e):
    if isinstance(e, (Acc, Const, Load)):
        return True
    if isinstance(e, Bin):
        return e.op in ("+", "-", "*", "/", "min", "max") and _epilogue_ok(e.a) and _epilogue_ok(e.b)
    if isinstance(e, Un):
        return e.op in ("neg", "relu", "sigmoid", "tanh", "exp", "abs") and _epilogue_ok(e.a)
    return False


@dataclass
class MeshSchedule(FixedSchedule):
    """One SUMMA plan: mc output channels and pc pixels per CPE, kc input channels per slice."""
    shape: GemmShape = None
    mc: int = 0
    pc: int = 0
    kc: int = 0
    flops: int = 0
    report: dict = field(default_factory=dict)

    @property
    def nco(self):
        return self.shape.CO // (MESH * self.mc)

    @property
    def nk(self):
        return self.shape.CI // (MESH * self.kc)

    @property
    def npt(self):
        return math.ceil(self.shape.P / (MESH * self.pc))

    def predict(self, k, cores, para_bytes):
        c = mesh_counts(self, cores, para_bytes)
        return {"get": {"ops": c["get_ops"], "bytes": c["get_bytes"]}, "put": {"ops": c["put_ops"], "bytes": c["put_bytes"]}}

    def __str__(self):
        g = self.shape
        return (f"mesh SUMMA: CPE (r, c) holds {self.mc} output channels x {self.pc} pixels, {self.kc} input channels "
                f"per slice; {self.nco} co tiles x {self.npt} pixel tiles x {self.nk} k steps per image; "
                f"W[{g.CO}x{g.CI}] rows by putr, X[{g.CI}x{g.P}] columns by putc; LDM {self.ldm_bytes}/{self.ldm_budget} B")


def mesh_weights(W, mc, kc):
    """W [CO, CI] laid out so that CPE (r, c)'s pieces for a co tile are one run: [co tile][r][c]
    [k step][mc][kc], each piece W[t*8*mc + r*mc + i, j*8*kc + c*kc + q] (one DMA per co tile)."""
    CO, CI = W.shape
    nco, nk = CO // (MESH * mc), CI // (MESH * kc)
    a = np.asarray(W).reshape(nco, MESH, mc, nk, MESH, kc)       # t r i j c q
    return np.ascontiguousarray(a.transpose(0, 1, 4, 3, 2, 5))   # t r c j i q


def relayout_weights(k, graph, buf, mc, kc):
    """Point k's weight buffer `buf` at a copy of its tensor in mesh_weights' layout (returns the
    original tensor's name: its data may be dropped when nothing else reads it)."""
    b = k.buffers[buf]
    src = graph.tensors[b.tensor]
    CO, CI = b.shape[0], b.shape[1]
    arr = mesh_weights(np.asarray(src.data).reshape(CO, CI), mc, kc).astype(src.dtype, copy=False)
    name = f"%swmesh:{k.name}:{buf}"
    graph.tensors[name] = Tensor(name, tuple(arr.shape), src.dtype, arr)
    k.buffers[buf] = replace(b, tensor=name)
    return src.name


def pixel_widths(P, pc, npt):
    """[tile][column]: the valid pixels of CPE column c in pixel tile u (0 past the end)."""
    u = np.arange(npt)[:, None]
    c = np.arange(MESH)[None, :]
    return np.clip(P - (u * MESH + c) * pc, 0, pc)


def mesh_counts(s, cores, para_bytes):
    """Exact DMA and message counts of a MeshSchedule (what mesh_c prints)."""
    g, mc, kc = s.shape, s.mc, s.kc
    pv = pixel_widths(g.P, s.pc, s.npt)                 # per pixel tile, per column
    live = int((pv > 0).sum()) * MESH                   # CPE-tiles with pixels (8 rows each)
    pix = int(pv.sum()) * MESH
    per_tile_gets = s.nk + len(g.res)
    gets = cores + s.nco * cores * (1 + len(g.vecs)) + g.N * s.nco * live * per_tile_gets
    get_bytes = (cores * para_bytes + s.nco * cores * (s.nk * mc * kc + len(g.vecs) * mc) * 4
                 + g.N * s.nco * (s.nk * kc + len(g.res) * mc) * pix * 4)
    puts, put_bytes = g.N * s.nco * live, g.N * s.nco * mc * pix * 4
    steps = g.N * s.nco * s.npt * s.nk * MESH          # sub-steps: one row and one column sender each
    a_msgs = -(-mc * kc // MSG_FLOATS)
    b_msgs = int(((kc * pv + MSG_FLOATS - 1) // MSG_FLOATS).sum())    # per tile, summed over columns
    putr = steps * MESH * a_msgs
    putc = g.N * s.nco * s.nk * MESH * b_msgs
    return {"get_ops": gets, "get_bytes": get_bytes, "put_ops": puts, "put_bytes": put_bytes,
            "regcomm": {"puts": putr + putc, "gets": (MESH - 1) * (putr + putc), "putr": putr,
                        "getr": (MESH - 1) * putr, "putc": putc, "getc": (MESH - 1) * putc}}


def mesh_ldm_bytes(g, mc, pc, kc):
    """The CPE's buffers: its W pieces, a received W piece, its X piece (two halves with more
    than one k step) and a received one (8 floats of slack each: a last message and the
    vector loop read past the data), the
    accumulators, the epilogue's per-channel slices and residual pieces."""
    return (ldm_align(4 * (mc * g.CI // MESH + MSG_FLOATS)) + ldm_align(4 * (mc * kc + MSG_FLOATS))
            + (1 + x_halves(g.CI // (MESH * kc))) * ldm_align(4 * (kc * pc + MSG_FLOATS))
            + ldm_align(4 * mc * pc) + len(g.vecs) * ldm_align(4 * mc) + len(g.res) * ldm_align(4 * mc * pc))


def mesh_seconds(k, hw, g, mc, pc, kc, para_bytes):
    """Modelled seconds of the plan (module docstring): lock-step phases, the slowest CPE each."""
    clock = model.clock(hw)
    msg = float(hw["regcomm_message_cycles"])
    lat = float(model.hwget(hw, "regcomm_latency_cycles") or 0.0)
    nco, nk, npt = g.CO // (MESH * mc), g.CI // (MESH * kc), math.ceil(g.P / (MESH * pc))
    dma = lambda nbytes, chunk: model.dma_seconds_per_cpe(hw, nbytes, chunk)   # noqa: E731
    t = dma(para_bytes, para_bytes)
    per_co = dma(4 * nk * mc * kc, 4 * nk * mc * kc) + len(g.vecs) * dma(4 * mc, 4 * mc)
    t += nco * per_co
    for pv in pixel_widths(g.P, pc, npt).max(axis=1):        # the widest column of each pixel tile
        pv = int(pv)
        if pv == 0:
            continue
        step = dma(4 * kc * pv, 4 * pv)
        phases = MESH * ((math.ceil(mc * kc / MSG_FLOATS) + math.ceil(kc * pv / MSG_FLOATS)) * msg + 2 * lat)
        comp = MESH * micro_cycles(hw, mc, kc, pv)
        tile = x_stream_seconds(hw, nk, step, (phases + comp) / clock)
        tile += (mc * pc + simd.epilogue_cycles(k, hw, mc * pv)) / clock
        tile += len(g.res) * dma(4 * mc * pv, 4 * pv) + dma(4 * mc * pv, 4 * pv)
        t += g.N * nco * tile
    return float(model.hwget(hw, "spawn_seconds")) + t


VECS = 4            # vectors of 4 pixels a micro-kernel block keeps in registers


def x_halves(nk):
    """Buffers of a CPE's X piece: two when there is a next k step to fetch during this one."""
    return 2 if nk > 1 else 1


def x_stream_seconds(hw, nk, fetch, work):
    """nk k steps, each fetching an X piece (`fetch` s) and working on it (`work` s: messages
    and multiply-adds): with two halves the next piece's DMA overlaps this step's work as a
    double-buffered box does in the tile search (cost/model.py cpe_seconds); the first fetch
    is exposed."""
    if x_halves(nk) == 1:
        return nk * (fetch + work)
    return float(model.cpe_seconds(hw, nk * fetch, nk * work, fetch, True))


def rows_of(mc):
    """Output channels a micro-kernel block keeps in registers."""
    return 2 if mc % 2 == 0 else 1


def micro_cycles(hw, mc, kc, pv):
    """Cycles of one sub-step's multiply of an mc x kc piece of W by a kc x pv piece of X
    (mesh_gemm_c.py's loops): per block of R rows and V vectors, kc iterations of V unaligned
    X loads, R scalar loads and broadcasts, R*V vector multiply-adds; the accumulators loaded
    (unaligned) and stored once per block. Blocks of VECS vectors, then single vectors."""
    unal = float(model.hwget(hw, "simd_unaligned_load_cost"))
    R = rows_of(mc)

    def block(V):
        return kc * model.issue(hw, R * V + R, V * unal + R, simd=True) + R * V * (unal + 1)
    full, rest = divmod(pv, 4 * VECS)
    return (mc // R) * (full * block(VECS) + math.ceil(rest / 4) * block(1))


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def mesh_schedule(k, hw, budget, api="athread", graph=None):
    """The fastest SUMMA plan for kernel k that fits the LDM budget, or (None, why)."""
    if api != "athread" or not hw.get("regcomm_message_cycles") or int(hw.get("cpes", 0)) != MESH * MESH:
        return None, "no register communication on this target (SW26010's 8x8 mesh)"
    g, why = gemm_shape(k, graph)
    if g is None:
        return None, why
    if g.CO % MESH or g.CI % MESH:
        return None, f"channels {g.CO}, {g.CI} are not multiples of {MESH}"
    para = 8 * len(k.buffers)
    best = None
    pcs = sorted({min(x, math.ceil(g.P / MESH / 8) * 8) for x in (8, 16, 32, 64, 128, 256, 512)})
    for mc in _divisors(g.CO // MESH):
        for kc in _divisors(g.CI // MESH):
            for pc in pcs:
                need = mesh_ldm_bytes(g, mc, pc, kc)
                if need > budget:
                    continue
                secs = mesh_seconds(k, hw, g, mc, pc, kc, para)
                if best is None or secs < best[0]:
                    best = (secs, mc, pc, kc, need)
    if best is None:
        return None, f"no plan fits {budget} B of LDM"
    secs, mc, pc, kc, need = best
    flops = k.flops()
    comp = compulsory_bytes(k)
    s = MeshSchedule(need, budget, secs, model.roofline_seconds(hw, flops, comp), comp, shape=g, mc=mc, pc=pc, kc=kc,
                     flops=flops)
    s.report = {"regcomm": mesh_counts(s, int(hw["cpes"]), para)["regcomm"], "mesh": str(s)}
    return s, ""


__all__ = ["GemmShape", "MeshSchedule", "gemm_shape", "mesh_schedule", "mesh_counts", "mesh_seconds", "pixel_widths"]
