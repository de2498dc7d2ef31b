"""Two 1x1 convolutions in one mesh kernel: the intermediate never leaves the 64 LDMs.

M = epi1(W1 X) is computed by SUMMA exactly as mesh_gemm.py does, one pixel tile at a time,
and kept: CPE (r, c) holds, for every co tile t of the first layer, its mc1 channels x pc
pixels of M (rows t*8*mc1 + r*mc1 .., its pixel block). That is already the layout SUMMA
wants for the second layer's right operand: with a k slice of kc2 = mc1 channels, k step j2
= the first layer's co tile j2, the slice of sub-step s lives on mesh row s. So Y =
epi2(W2 M) runs as a second SUMMA whose column broadcasts send M pieces from LDM, and only
W1, W2, X, the epilogues' inputs and Y touch main memory: M is neither written nor read.

Per pixel tile (all loops over pixel tiles and images outermost, so M for a tile is whole
before the second layer reads it) each CPE fetches its W1 pieces per co tile of layer 1 and
its W2 pieces per co tile of layer 2: the weights are read once per pixel tile and image.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..cost import model
from ..cost.predict import compulsory_bytes
from ..schedule import simd
from ..schedule.kernel_schedule import ldm_align
from .gather import FixedSchedule
from .mesh_gemm import MESH, MSG_FLOATS, _divisors, gemm_shape, micro_cycles, pixel_widths, x_halves, x_stream_seconds


@dataclass
class ChainSchedule(FixedSchedule):
    """The plan of a chained pair: the producer's kernel, both GemmShapes, mc1 x pc (and kc1)
    for layer 1, mc2 x pc for layer 2 (its k slice is mc1)."""
    first: object = None          # the producer Kernel (its buffers and epilogue; not in the program)
    g1: object = None
    g2: object = None
    mc1: int = 0
    kc1: int = 0
    mc2: int = 0
    pc: int = 0
    flops: int = 0
    report: dict = field(default_factory=dict)

    @property
    def nco1(self):
        return self.g1.CO // (MESH * self.mc1)

    @property
    def nk1(self):
        return self.g1.CI // (MESH * self.kc1)

    @property
    def nco2(self):
        return self.g2.CO // (MESH * self.mc2)

    @property
    def npt(self):
        return math.ceil(self.g1.P / (MESH * self.pc))

    def predict(self, k, cores, para_bytes):
        c = chain_counts(self, cores, para_bytes)
        return {"get": {"ops": c["get_ops"], "bytes": c["get_bytes"]}, "put": {"ops": c["put_ops"], "bytes": c["put_bytes"]}}

    def __str__(self):
        return (f"mesh chain: {self.g1.CI} -> {self.g1.CO} -> {self.g2.CO} channels over {self.g1.P} pixels; CPE (r, c) "
                f"holds {self.mc1} x {self.pc} of the intermediate per co tile ({self.nco1} tiles, kept in LDM), "
                f"{self.mc2} x {self.pc} of the output ({self.nco2} tiles), {self.kc1}-channel k slices; "
                f"{self.npt} pixel tiles; LDM {self.ldm_bytes}/{self.ldm_budget} B")


def chain_counts(s, cores, para_bytes):
    """Exact DMA and message counts of a ChainSchedule (what mesh_chain_c prints)."""
    g1, g2, mc1, kc1, mc2 = s.g1, s.g2, s.mc1, s.kc1, s.mc2
    pv = pixel_widths(g1.P, s.pc, s.npt)
    live = int((pv > 0).sum()) * MESH
    pix = int(pv.sum()) * MESH
    tiles = g1.N * s.npt                                   # (image, pixel tile) per CPE
    w_gets = s.nco1 * (1 + len(g1.vecs)) + s.nco2 * (1 + len(g2.vecs))
    w_bytes = 4 * (s.nco1 * (s.nk1 * mc1 * kc1 + len(g1.vecs) * mc1) + s.nco2 * (s.nco1 * mc2 * mc1 + len(g2.vecs) * mc2))
    gets = cores + tiles * cores * w_gets + g1.N * live * (s.nco1 * (s.nk1 + len(g1.res)) + s.nco2 * len(g2.res))
    get_bytes = (cores * para_bytes + tiles * cores * w_bytes
                 + g1.N * pix * 4 * (s.nco1 * (s.nk1 * kc1 + len(g1.res) * mc1) + s.nco2 * len(g2.res) * mc2))
    puts, put_bytes = g1.N * s.nco2 * live, g1.N * s.nco2 * mc2 * pix * 4
    a1, a2 = -(-mc1 * kc1 // MSG_FLOATS), -(-mc2 * mc1 // MSG_FLOATS)
    b1 = int(((kc1 * pv + MSG_FLOATS - 1) // MSG_FLOATS).sum())
    b2 = int(((mc1 * pv + MSG_FLOATS - 1) // MSG_FLOATS).sum())
    putr = tiles * MESH * MESH * (s.nco1 * s.nk1 * a1 + s.nco2 * s.nco1 * a2)
    putc = g1.N * MESH * (s.nco1 * s.nk1 * b1 + s.nco2 * s.nco1 * b2)
    return {"get_ops": gets, "get_bytes": get_bytes, "put_ops": puts, "put_bytes": put_bytes,
            "regcomm": {"puts": putr + putc, "gets": (MESH - 1) * (putr + putc), "putr": putr,
                        "getr": (MESH - 1) * putr, "putc": putc, "getc": (MESH - 1) * putc}}


def chain_buffers(g1, g2, mc1, kc1, mc2, pc):
    """(name, bytes) of a CPE's LDM buffers, in allocation order (mesh_chain_c allocates these)."""
    piece = lambda n: ldm_align(4 * (n + MSG_FLOATS))   # noqa: E731  (slack: a last message, the vector loop)
    halves = x_halves(g1.CI // (MESH * kc1))
    out = [("A1", piece(mc1 * g1.CI // MESH)), ("A1r", piece(mc1 * kc1)),
           *[(f"B1{h}", piece(kc1 * pc)) for h in range(halves)], ("B1r", piece(kc1 * pc)), ("acc1", ldm_align(4 * mc1 * pc)),
           ("M", (g1.CO // (MESH * mc1)) * piece(mc1 * pc)),
           ("A2", piece(mc2 * g1.CO // MESH)), ("A2r", piece(mc2 * mc1)), ("B2r", piece(mc1 * pc)),
           ("acc2", ldm_align(4 * mc2 * pc))]
    out += [(f"V1_{b}", ldm_align(4 * mc1)) for b in g1.vecs] + [(f"R1_{b}", ldm_align(4 * mc1 * pc)) for b in g1.res]
    out += [(f"V2_{b}", ldm_align(4 * mc2)) for b in g2.vecs] + [(f"R2_{b}", ldm_align(4 * mc2 * pc)) for b in g2.res]
    return out


def chain_seconds(k1, k2, hw, g1, g2, mc1, kc1, mc2, pc, para_bytes):
    """Modelled seconds: lock-step phases, the slowest CPE each (as mesh_gemm.mesh_seconds)."""
    clock = model.clock(hw)
    msg = float(hw["regcomm_message_cycles"])
    lat = float(model.hwget(hw, "regcomm_latency_cycles") or 0.0)
    nco1, nk1, nco2 = g1.CO // (MESH * mc1), g1.CI // (MESH * kc1), g2.CO // (MESH * mc2)
    npt = math.ceil(g1.P / (MESH * pc))
    dma = lambda nbytes, chunk: model.dma_seconds_per_cpe(hw, nbytes, chunk)   # noqa: E731
    one = lambda nbytes: dma(nbytes, nbytes)     # noqa: E731  (W pieces are one run: mesh_gemm.mesh_weights)
    weights = (nco1 * (one(4 * nk1 * mc1 * kc1) + len(g1.vecs) * one(4 * mc1))
               + nco2 * (one(4 * nco1 * mc2 * mc1) + len(g2.vecs) * one(4 * mc2)))
    t = dma(para_bytes, para_bytes)
    for pv in pixel_widths(g1.P, pc, npt).max(axis=1):
        pv = int(pv)
        tile = weights
        if pv:
            ph1 = MESH * ((math.ceil(mc1 * kc1 / MSG_FLOATS) + math.ceil(kc1 * pv / MSG_FLOATS)) * msg + 2 * lat)
            ph2 = MESH * ((math.ceil(mc2 * mc1 / MSG_FLOATS) + math.ceil(mc1 * pv / MSG_FLOATS)) * msg + 2 * lat)
            layer1 = x_stream_seconds(hw, nk1, dma(4 * kc1 * pv, 4 * pv),
                                      (ph1 + MESH * micro_cycles(hw, mc1, kc1, pv)) / clock)
            cyc = nco1 * (mc1 * pc + simd.epilogue_cycles(k1, hw, mc1 * pv))
            cyc += nco2 * (nco1 * (ph2 + MESH * micro_cycles(hw, mc2, mc1, pv)) + mc2 * pc
                           + simd.epilogue_cycles(k2, hw, mc2 * pv))
            tile += cyc / clock + nco1 * (layer1 + len(g1.res) * dma(4 * mc1 * pv, 4 * pv))
            tile += nco2 * (len(g2.res) + 1) * dma(4 * mc2 * pv, 4 * pv)
        t += g1.N * tile
    return float(model.hwget(hw, "spawn_seconds")) + t


def chain_schedule(k1, k2, hw, budget, api="athread", graph=None):
    """The fastest chain plan for producer k1 and consumer k2 that fits, or (None, why)."""
    if api != "athread" or not hw.get("regcomm_message_cycles") or int(hw.get("cpes", 0)) != MESH * MESH:
        return None, "no register communication on this target (SW26010's 8x8 mesh)"
    g1, why = gemm_shape(k1, graph)
    if g1 is None:
        return None, f"producer: {why}"
    g2, why = gemm_shape(k2, graph)
    if g2 is None:
        return None, f"consumer: {why}"
    if (g1.N, g1.P, g1.CO) != (g2.N, g2.P, g2.CI) or k2.buffers[g2.x].tensor != k1.buffers[g1.y].tensor:
        return None, "the consumer's input is not the producer's output"
    if any(c % MESH for c in (g1.CI, g1.CO, g2.CO)):
        return None, "channels are not multiples of 8"
    para = 8 * (len(k1.buffers) - 1 + len(k2.buffers))     # the consumer's struct gains the producer's inputs
    best = None
    pcs = sorted({min(x, math.ceil(g1.P / MESH / 8) * 8) for x in (8, 16, 32, 64, 128, 256)})
    for mc1 in _divisors(g1.CO // MESH):
        for mc2 in _divisors(g2.CO // MESH):
            for kc1 in _divisors(g1.CI // MESH):
                for pc in pcs:
                    need = sum(b for _, b in chain_buffers(g1, g2, mc1, kc1, mc2, pc))
                    if need > budget:
                        continue
                    secs = chain_seconds(k1, k2, hw, g1, g2, mc1, kc1, mc2, pc, para)
                    if best is None or secs < best[0]:
                        best = (secs, mc1, kc1, mc2, pc, need)
    if best is None:
        return None, f"no chain plan fits {budget} B of LDM"
    secs, mc1, kc1, mc2, pc, need = best
    flops = k1.flops() + k2.flops()
    comp = compulsory_bytes(k1) + compulsory_bytes(k2) - 2 * 4 * k1.points    # M is neither written nor read
    s = ChainSchedule(need, budget, secs, model.roofline_seconds(hw, flops, comp), comp, first=k1, g1=g1, g2=g2,
                      mc1=mc1, kc1=kc1, mc2=mc2, pc=pc, flops=flops)
    s.report = {"regcomm": chain_counts(s, int(hw["cpes"]), para)["regcomm"], "mesh": str(s)}
    return s, ""


__all__ = ["ChainSchedule", "chain_schedule", "chain_counts", "chain_buffers", "chain_seconds"]
