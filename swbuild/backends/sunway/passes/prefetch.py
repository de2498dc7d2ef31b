"""Cross-layer prefetch inside a grouped launch (issue 16, the paper's cross-layer
instruction scheduling): the previous kernel of the launch issues the first fetch of the next
kernel's boxes once its own first fetches are under way, so that DMA overlaps the previous
kernel's compute instead of stalling the next one's start.

A box qualifies when it is double-buffered, its buffer has no other box, and it reads a
tensor the previous kernel does not write: weights and other constants, graph inputs, and
activations of earlier kernels (complete at the barrier that opens the previous kernel; the
static memory plan gives the previous kernel's output no byte of a tensor live after it).
Broadcast boxes qualify too (unless the previous kernel opens the launch: no barrier would
order the CPEs' allocations before the broadcast): the whole row (array) records the footprint
and the CPE that would have issued the kernel's first broadcast issues it. A kernel is a target when its
previous kernel is double-buffered and not a target itself, and the prefetched halves fit
beside the previous kernel's LDM. The launch allocates those halves before the barrier that
opens the previous kernel (every CPE holds them before any broadcast lands) and frees them
after the target returns, so every LDM block is freed in the reverse order of its
allocation; chains (a target's previous kernel a target too) would free out of order.

The DMA is the same: the target's boxes move the same bytes, plus one fetch of its parameter
struct per CPE (the prefetch reads the buffer addresses from it), so predicted DMA stays
exact. The cost model takes the boxes' first-fetch wait off the target's exposed time, moves
their DMA seconds into the previous kernel's DMA stream on the CPE that issues them
(overlapped with its compute when double-buffered) and charges the previous kernel the
parameter fetch; among non-adjacent targets the set with the largest modelled saving is
chosen.
"""
from __future__ import annotations

import numpy as np

from ....optimizer.stages import storage
from ..cost import model
from ..cost.predict import Simulations
from ..schedule.kernel_schedule import ldm_align


def halves_bytes(b, tiles):
    """LDM both halves of a prefetched box take: what its launch allocates."""
    return ldm_align(b.cap(tiles) * 4) * 2


def prefetched_halves(k):
    """(box name, LDM bytes of both halves) of a target's prefetched boxes, in box order."""
    s = k.schedule
    return [(b.name, halves_bytes(b, s.tiles)) for b in s.boxes if b.name in s.prefetched]


def candidates(program, prev, k):
    """Boxes of `k` its previous kernel `prev` may fetch: double-buffered, one box per buffer,
    reading an allocation `prev` does not write into (so it is complete at the barrier before
    `prev`: constants, graph inputs, activations of earlier kernels; the static memory plan
    gives `prev`'s output no byte of a tensor live after it). A Concat written in place is one
    allocation: a part `prev` writes makes the whole Concat off limits."""
    s = k.schedule
    written = storage(program, prev.buffers[prev.out].tensor)
    per_buf = {}
    for b in s.boxes:
        per_buf[b.buf] = per_buf.get(b.buf, 0) + 1
    return [b for b in s.boxes if b.context != "out" and b.halves == 2 and per_buf[b.buf] == 1
            and storage(program, k.buffers[b.buf].tensor) != written]


def _at(v, cores):
    return np.broadcast_to(np.asarray(v, float), (cores,))


def _first_issuer(cpe, width, form):
    """Whether each CPE issues a shared box's first fetch (emit/slave_dma.py issuer): the first
    of its row (array), or under 2-D sharing of the box's row, column or array."""
    if form == "col":
        return cpe // 8 == 0
    if form == "array":
        return cpe == 0
    return cpe % (8 if form == "row" else width) == 0


def pair_seconds(hw, cores, prev, nxt, rp, rn, boxes):
    """Per-CPE seconds of (previous kernel, target) when the previous one issues the target's
    first fetch of `boxes` (simulate results rp, rn). Every CPE stops waiting for them; the
    DMA itself moves to the CPE that issues it (a broadcast's: the first CPE of each row or
    of the array, as slave.py deals them)."""
    cpe = np.arange(cores)
    wait = np.zeros(cores)
    moved = np.zeros(cores)
    for b in boxes:
        f = _at(rn["first_fetch_seconds"].get(b.buf, 0.0), cores)
        wait = wait + f
        moved = moved + (np.where(_first_issuer(cpe, nxt.schedule.share_width, b.share_form), f, 0.0) if b.shared else f)
    cn = model.cpe_seconds(hw, rn["dma_seconds"] - moved, rn["compute_seconds"], _at(rn["exposed_seconds"], cores) - wait,
                           nxt.schedule.double_buffer)
    cn = np.where(rn["tiles"] > 0, cn, rn["para_seconds"])
    para = 8 * len(nxt.buffers)
    pp = model.dma_seconds_per_cpe(hw, para, para)      # the prefetch reads the target's parameter struct
    cp = model.cpe_seconds(hw, rp["dma_seconds"] + moved + pp, rp["compute_seconds"], _at(rp["exposed_seconds"], cores) + pp,
                           prev.schedule.double_buffer)
    cp = np.where(rp["tiles"] > 0, cp, rp["para_seconds"] + pp)
    return cp, cn


def prefetch_next_kernel(program, target, options):
    """Option `grouping`: in a launch, a kernel issues the next one's first fetches it does not write.
    Each pair's gain is modelled alone (its previous kernel no target); no two consecutive
    kernels are both targets, and among such choices the one with the largest summed gain is
    taken (a path's heaviest independent set)."""
    launches = program.target_state.launches
    if not launches:
        return program
    hw, cores = target.hardware, target.cores
    sim = Simulations(hw, cores)
    by = {k.name: k for k in program.kernels}
    for ln in launches:
        ks = [by[n] for n in ln.kernels] if ln.stitched else []
        gains = [(0.0, ())] + [_gain(program, hw, cores, sim, prev, nxt, first=not i)
                               for i, (prev, nxt) in enumerate(zip(ks, ks[1:]))]
        for j in _heaviest_independent(gains):
            ks[j].schedule.prefetched = gains[j][1]
            ks[j - 1].schedule.hook = True
    return program


def _gain(program, hw, cores, sim, prev, nxt, first=False):
    """(modelled seconds saved, box names) of `prev` prefetching those of `nxt`'s candidate
    boxes that fit beside its own LDM; (0, ()) when nothing fits or it does not pay. `first`:
    `prev` opens the launch, so no barrier precedes it that would order every CPE's allocation
    of the halves before a broadcast into them: broadcast boxes are left out."""
    if prev.kind != "compute" or nxt.kind != "compute" or not prev.schedule.double_buffer:
        return 0.0, ()      # a mesh kernel (kinds/mesh_gemm.py) neither issues nor takes a prefetch
    room = prev.schedule.ldm_budget - prev.schedule.ldm_bytes
    rn = sim(nxt)
    chosen = []
    # the longest first fetches first, while their halves fit beside `prev`'s LDM
    boxes = [b for b in candidates(program, prev, nxt) if not (first and b.shared)]
    for b in sorted(boxes, key=lambda b: -float(np.max(rn["first_fetch_seconds"].get(b.buf, 0.0)))):
        need = halves_bytes(b, nxt.schedule.tiles)
        if need <= room:
            chosen.append(b)
            room -= need
    if not chosen:
        return 0.0, ()
    rp = sim(prev)
    cp, cn = pair_seconds(hw, cores, prev, nxt, rp, rn, chosen)
    saved = float(rp["cpe_seconds"].max()) + float(rn["cpe_seconds"].max()) - float(cp.max()) - float(cn.max())
    return (saved, tuple(b.name for b in nxt.schedule.boxes if b in chosen)) if saved > 0 else (0.0, ())


def _heaviest_independent(gains):
    """Indices with positive gain, no two adjacent, of the largest total (dynamic programming)."""
    best = [(0.0, [])]                 # best[i]: the best choice among indices < i
    for i, (g, _) in enumerate(gains):
        skip = best[-1]
        before = best[-2] if len(best) > 1 else (0.0, [])
        take = (before[0] + g, before[1] + [i])
        best.append(take if g > 0 and take[0] > skip[0] else skip)
    return best[-1][1]


def adjust_entries(program, entries, tc, sims=None):
    """The plan's per-kernel entries (cost/predict.py) with the prefetch links applied: a
    target's DMA gains the prefetch's fetch of its parameter struct on every CPE, its
    modelled time loses the prefetched first fetches; its previous kernel's modelled time
    carries them (pair_seconds) and its LDM holds the prefetched halves. `sims`: the
    Simulations predict_program used (else the kernels are simulated again)."""
    by = {k.name: k for k in program.kernels}
    idx = {e["name"]: i for i, e in enumerate(entries)}
    sim = sims or Simulations(tc.hardware, tc.cores)
    for ln in program.target_state.launches or ():
        for prev, nxt in zip(ln.kernels, ln.kernels[1:]):
            kp, kn = by[prev], by[nxt]
            if not getattr(kn.schedule, "prefetched", ()):
                continue
            boxes = [b for b in kn.schedule.boxes if b.name in kn.schedule.prefetched]
            bufs = [b.buf for b in boxes]
            cp, cn = pair_seconds(tc.hardware, tc.cores, kp, kn, sim(kp), sim(kn), boxes)
            ep, en = dict(entries[idx[prev]]), dict(entries[idx[nxt]])
            ep["modeled_seconds"] = model.kernel_seconds(tc.hardware, cp)
            ep["ldm_bytes"] = int(ep["ldm_bytes"]) + sum(n for _, n in prefetched_halves(kn))
            ep["prefetches_for"] = nxt
            para = 8 * len(kn.buffers)
            en["dma"] = {"get": {"ops": en["dma"]["get"]["ops"] + tc.cores,
                                 "bytes": en["dma"]["get"]["bytes"] + tc.cores * para},
                         "put": dict(en["dma"]["put"])}
            en["modeled_seconds"] = model.kernel_seconds(tc.hardware, cn)
            en["prefetched"] = bufs
            en["prefetch_saved_seconds"] = (float(entries[idx[prev]]["modeled_seconds"]) + float(entries[idx[nxt]]["modeled_seconds"])
                                            - ep["modeled_seconds"] - en["modeled_seconds"])
            entries[idx[prev]], entries[idx[nxt]] = ep, en
    return entries
