"""Compile-time predictions per kernel: flops, DMA operations and bytes, LDM use, model time.

`simulate` replays, for every CPE, the step sequence the slave printer emits (the CPE's
tiles in grid order, the reduce tiles of each in reduce order) and every box's footprint at
every step, vectorised with numpy. A box is fetched when its footprint differs from the
previous step's, exactly as the generated code decides at run time, so the emulator's
measured counters must equal these numbers. The same replay gives each CPE's DMA seconds
(bandwidth by contiguous chunk size) and compute cycles (the inner loops' cycle model) for
the cost model.
"""
from __future__ import annotations

import math

import numpy as np

from ..schedule import simd
from ..schedule.dma import box_plans, transfers
from ..schedule.grid import all_cpe_sequences, mixed_radix
from . import model


def footprints(b, ranges):
    """Vectorised unclamped footprint: lists (per dim) of lo and hi arrays."""
    los, his = b.footprint(ranges, np.minimum, np.maximum)
    return [np.asarray(x, dtype=np.int64) for x in los], [np.asarray(x, dtype=np.int64) for x in his]


def simulate(k, cores, para_bytes, hw=None, grid_order=None, mode=None):
    """Per-CPE DMA counts and, with `hw`, the cost model's per-CPE seconds."""
    s = k.schedule
    t = s.tiles
    ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
    order = grid_order or s.grid_order
    mode = mode or s.partition
    counts = [math.ceil(ext[n] / t[n]) for n in order]
    # each CPE's tiles, concatenated: seq[i] = global tile, cpe_of[i], first[i] (first of its CPE)
    lane = s.lane
    lane_pos = order.index(lane) if lane else None
    width = s.share_width
    seq, cpe_of, pos = all_cpe_sequences(counts, cores, mode, lane_pos, width)   # pos: place in its CPE's run
    coords = mixed_radix(seq, counts)
    tstart = {n: c * t[n] for n, c in zip(order, coords)}
    tcount = {n: np.minimum(t[n], ext[n] - tstart[n]) for n in order}
    red_order = list(s.red_order)
    rcounts = [math.ceil(ext[n] / t[n]) for n in red_order]
    nsteps = math.prod(rcounts)

    get_ops = np.zeros(cores, np.int64)
    get_bytes = np.zeros(cores, np.int64)
    put_ops = np.zeros(cores, np.int64)
    put_bytes = np.zeros(cores, np.int64)
    dma_s = np.zeros(cores)
    syncs = np.zeros(cores)
    rma = model.rma_share(hw) if hw is not None else None
    rma_ops = np.zeros(cores, np.int64)        # RMA broadcasts issued (SW26010-Pro sharing)
    rma_bytes = np.zeros(cores, np.int64)
    rma_cyc = np.zeros(cores)                  # a member's cycles waiting for them
    rma_forms = {}                             # emulator counter name -> (broadcasts, bytes landed)
    first_s = np.zeros(cores)
    first_by = {}           # box buffer -> per-CPE seconds of its first fetch (exposed)
    expand = np.zeros(cores)
    nseq = len(seq)
    for b in s.boxes:
        if b.context == "out":
            continue
        lv = b.level if (b.context == "body" and k.combine is not None) else -1
        P = math.prod(rcounts[:lv + 1])
        # rows: (sequence position, prefix) with the prefix fastest
        rows_seq = np.repeat(np.arange(nseq), P)
        pidx = np.tile(np.arange(P, dtype=np.int64), nseq)
        ranges = {}
        for n in order:
            ranges[n] = (tstart[n][rows_seq], tcount[n][rows_seq])
        pc = mixed_radix(pidx, rcounts[:lv + 1]) if lv >= 0 else []
        for i, n in enumerate(red_order):
            if i <= lv:
                st = pc[i] * t[n]
                ranges[n] = (st, np.minimum(t[n], ext[n] - st))
            else:
                ranges[n] = (np.zeros(len(rows_seq), np.int64), np.full(len(rows_seq), t[n], np.int64))
        for a in k.reduce_axes:
            if a.name not in ranges:
                ranges[a.name] = (0, a.extent)
        lo, hi = footprints(b, ranges)
        nrow = len(rows_seq)
        if nrow == 0:
            continue
        lo = [np.broadcast_to(x, (nrow,)) for x in lo]
        hi = [np.broadcast_to(x, (nrow,)) for x in hi]
        change = np.ones(nrow, bool)
        if nrow > 1:
            diff = np.zeros(nrow - 1, bool)
            for x in lo + hi:
                diff |= x[1:] != x[:-1]
            same_cpe = cpe_of[rows_seq[1:]] == cpe_of[rows_seq[:-1]]
            change[1:] = diff | ~same_cpe
        calls, by, chunk = transfers(b, lo, hi, k.buf_bytes(b.buf), n=nrow)
        owner = cpe_of[rows_seq]
        sel = change
        if b.shared:
            # one broadcast per row (array): its CPEs see the same changes, and the CPE at
            # k % width in it issues the box's k-th fetch (slave.py); under 2-D sharing a
            # column's the CPE in row k % 8 of it, the array's CPE k % 64
            gw, place, form = SHARE_FORMS[b.share_form] if b.share_form else \
                (width, lambda c: c % width, "row_ibcast" if width == 8 else "ibcast")
            k_th = np.cumsum(change) - 1
            starts = np.ones(nrow, bool)
            starts[1:] = owner[1:] != owner[:-1]
            first_k = np.maximum.accumulate(np.where(starts, k_th - change + 1, 0))
            lead = ((k_th - first_k) % gw) == place(owner)
            syncs += np.bincount(owner[change], minlength=cores) * (1 if b.halves == 2 else 2)
            sel = change & lead
            if rma is not None:     # the issuer broadcasts a fetch that moved bytes (slave.py _rma_share)
                full = change & (by > 0)
                rma_ops += np.bincount(owner[sel & full], minlength=cores).astype(np.int64)
                rma_bytes += np.bincount(owner[sel & full], weights=by[sel & full], minlength=cores).astype(np.int64)
                ops, landed = rma_forms.get(form, (0, 0))
                rma_forms[form] = (ops + int((sel & full).sum()), landed + gw * int(by[sel & full].sum()))
                rma_cyc += np.bincount(owner[full], weights=model.rma_cycles(rma, by[full].astype(float)),
                                       minlength=cores)
        get_ops += np.bincount(owner[sel], weights=calls[sel], minlength=cores).astype(np.int64)
        get_bytes += np.bincount(owner[sel], weights=by[sel], minlength=cores).astype(np.int64)
        if hw is not None:
            secs = model.dma_seconds_per_cpe(hw, by, chunk)
            dma_s += np.bincount(owner[sel], weights=secs[sel], minlength=cores)
            firsts = np.zeros(nrow, bool)
            firsts[0] = True
            if nrow > 1:
                firsts[1:] = cpe_of[rows_seq[1:]] != cpe_of[rows_seq[:-1]]
            f = np.bincount(owner[firsts], weights=secs[firsts], minlength=cores)
            first_s += f
            first_by[b.buf] = first_by.get(b.buf, 0.0) + f
            if b.stage is not None:     # every CPE computes its own stage when the box lands
                plo, phi = footprints(b.stage.box, ranges)
                E = np.ones(nrow, np.int64)
                for d in range(len(plo)):
                    E = E * np.broadcast_to(phi[d] - plo[d] + 1, (nrow,))
                expand += np.bincount(owner[change], weights=simd.stage_cycles(hw, E[change], b.stage.stage.producer),
                                      minlength=cores)
            if b.pad_dims:
                E = np.ones(nrow, np.int64)
                clamped = np.zeros(nrow, bool)
                for d in range(len(b.shape)):
                    E = E * (hi[d] - lo[d] + 1)
                    clamped |= (lo[d] < 0) | (hi[d] > b.shape[d] - 1)
                w = change & clamped      # every CPE expands its own copy (slave.py), issuer or not
                expand += np.bincount(owner[w], weights=simd.expand_cycles(hw, E[w]), minlength=cores)
    # output tiles
    ob = next(b for b in s.boxes if b.context == "out")
    oranges = {n: (tstart[n], tcount[n]) for n in order}
    lo, hi = footprints(ob, oranges)
    lo = [np.broadcast_to(x, (nseq,)) for x in lo]
    hi = [np.broadcast_to(x, (nseq,)) for x in hi]
    calls, by, chunk = transfers(ob, lo, hi, k.elem_bytes, n=nseq)
    put_ops += np.bincount(cpe_of, weights=calls, minlength=cores).astype(np.int64)
    put_bytes += np.bincount(cpe_of, weights=by, minlength=cores).astype(np.int64)
    out = {"get_ops": get_ops, "get_bytes": get_bytes, "put_ops": put_ops, "put_bytes": put_bytes,
           "tiles": np.bincount(cpe_of, minlength=cores), "nsteps": nsteps,
           "rma_ops": rma_ops, "rma_bytes": rma_bytes, "rma_forms": rma_forms, "share_width": width}
    if hw is None:
        return out
    psecs = model.dma_seconds_per_cpe(hw, by, chunk)
    dma_s += np.bincount(cpe_of, weights=psecs, minlength=cores)
    last_put = np.zeros(cores)
    if nseq:
        lasts = np.ones(nseq, bool)
        lasts[:-1] = cpe_of[1:] != cpe_of[:-1]
        last_put += np.bincount(cpe_of[lasts], weights=psecs[lasts], minlength=cores)
    para = model.dma_seconds_per_cpe(hw, para_bytes, para_bytes)
    # compute cycles per tile
    textent = {n: tcount[n] for n in order}
    points = np.ones(nseq)
    for n in order:
        points = points * textent[n]
    red_points = math.prod(a.extent for a in k.reduce_axes)
    cyc = simd.init_cycles(k, hw, points) + simd.epilogue_cycles(k, hw, points)
    if k.combine is not None:
        full = simd.step_cycles(k, s.vector, hw, textent, red_points)
        zero = simd.step_cycles(k, s.vector, hw, textent, 0)
        cyc = cyc + full + (nsteps - 1) * zero
    comp_cyc = np.bincount(cpe_of, weights=np.broadcast_to(cyc, (nseq,)), minlength=cores) + expand
    # 2-D sharing meets as an array (slave.py)
    comp_cyc = comp_cyc + syncs * model.sync_cycles(hw, cores if s.cols else width) + rma_cyc
    comp_s = comp_cyc / model.clock(hw)
    exposed = first_s + last_put + para
    dma_total = dma_s + para
    cpe_s = model.cpe_seconds(hw, dma_total, comp_s, exposed, s.double_buffer)
    busy = out["tiles"] > 0
    out.update(dma_seconds=dma_total, compute_seconds=comp_s, cpe_seconds=np.where(busy, cpe_s, para),
               # what no double buffering hides (benchmarks/exposed_time.py): per CPE
               first_fetch_seconds=first_by, last_put_seconds=last_put, para_seconds=para,
               exposed_seconds=exposed)
    return out


def predict_kernel(k, cores, para_bytes, hw=None):
    if k.kind != "compute":
        return k.schedule.predict(k, cores, para_bytes)     # a special kind's schedule knows its DMA (kinds/)
    r = simulate(k, cores, para_bytes)
    return {"get": {"ops": int(r["get_ops"].sum()) + cores, "bytes": int(r["get_bytes"].sum()) + cores * para_bytes},
            "put": {"ops": int(r["put_ops"].sum()), "bytes": int(r["put_bytes"].sum())}}


def compulsory_bytes(k, itemsize=None, boxes=None):
    """Bytes a kernel must move at least: every tensor region it reads once, its output once.
    `boxes`: the kernel's box_plans, when the caller has them."""
    by_tensor, size = {}, {}
    full = {a.name: (0, a.extent) for a in list(k.axes) + list(k.reduce_axes)}
    for b in boxes if boxes is not None else box_plans(k):
        if b.context == "out":
            continue
        lo, hi = b.footprint(full)
        box = []
        for d in range(len(b.shape)):
            box.append((max(lo[d], 0), min(hi[d], b.shape[d] - 1)))
        key = k.buffers[b.buf].tensor
        prev = by_tensor.get(key)
        if prev is not None and len(prev) == len(box):
            box = [(min(a[0], c[0]), max(a[1], c[1])) for a, c in zip(prev, box)]
        by_tensor[key] = box
        size[key] = itemsize or k.buf_bytes(b.buf)
    n = sum(math.prod(max(0, h - lo_ + 1) for lo_, h in box) * size[t] for t, box in by_tensor.items())
    return n + k.points * (itemsize or k.elem_bytes)


def boxes_key(sched):
    """What simulate reads of a schedule's boxes: each one's place in the loops, sharing,
    footprint and transfer shape (names aside, so repeated layers have the same key)."""
    return tuple((b.context, b.level, b.shared, b.share_form, b.halves, repr(b.index), tuple(b.shape), b.merge, b.blocked, b.wide,
                  tuple(b.pad_dims), repr(b.stage)) for b in sched.boxes)


def _replay_key(k, cores, para):
    """What simulate(k, cores, para, hw) depends on: the kernel's axes and expressions, its
    buffers' shapes and its schedule (tiles, orders, deal, sharing, buffering, vector plan and
    boxes_key). Repeated layers have the same key."""
    s = k.schedule
    return (cores, para, tuple((a.name, a.extent) for a in list(k.axes) + list(k.reduce_axes)), k.combine, k.init,
            str(k.body), str(k.epilogue), tuple(sorted((n, tuple(b.shape)) for n, b in k.buffers.items())),
            tuple(s.tiles.items()), tuple(s.red_order), tuple(s.grid_order), s.partition, s.lane, s.share_width, s.cols,
            bool(s.double_buffer), str(s.vector), getattr(s.vector, "acc_aligned", None), boxes_key(s))


class Simulations:
    """simulate(k, cores, para, hw) per kernel, repeated layers (the same _replay_key) once."""

    def __init__(self, hw, cores):
        self.hw, self.cores, self.memo = hw, cores, {}

    def __call__(self, k):
        para = 8 * len(k.buffers)
        key = _replay_key(k, self.cores, para)
        if key not in self.memo:
            self.memo[key] = simulate(k, self.cores, para, self.hw)
        return self.memo[key]


def predict_program(program, tc, sims=None):
    """Per kernel, the plan's entry. `sims`: a Simulations to share with later callers."""
    out = []
    hw = tc.hardware
    sims = sims or Simulations(hw, tc.cores)
    for k in program.kernels:
        para = 8 * len(k.buffers)
        if k.kind != "compute":
            dma = predict_kernel(k, tc.cores, para)
            sch = k.schedule
            out.append({"name": k.name, "op": k.op, "node": k.node, "fused": list(k.fused),
                        "kind": k.kind, "flops": int(getattr(sch, "flops", 0)) or _flops(k), "dma": dma,
                        "ldm_bytes": int(sch.ldm_bytes), "ldm_budget": int(sch.ldm_budget),
                        "modeled_seconds": float(sch.modeled_seconds), "roofline_seconds": float(sch.roofline_seconds),
                        "compulsory_bytes": int(sch.compulsory_bytes), **getattr(sch, "report", {})})
            continue
        r = sims(k)
        dma = {"get": {"ops": int(r["get_ops"].sum()) + tc.cores, "bytes": int(r["get_bytes"].sum()) + tc.cores * para},
               "put": {"ops": int(r["put_ops"].sum()), "bytes": int(r["put_bytes"].sum())}}
        s = k.schedule
        flops = k.flops()
        comp = compulsory_bytes(k)
        modeled = model.kernel_seconds(hw, r["cpe_seconds"])
        roof = model.roofline_seconds(hw, flops, comp)
        busiest = int(np.argmax(r["cpe_seconds"]))
        out.append({**rma_entry(r), "name": k.name, "op": k.op, "node": k.node, "fused": list(k.fused), "flops": flops,
                    "ldm_bytes": s.ldm_bytes, "ldm_budget": s.ldm_budget,
                    "tiles": s.tiles, "spatial_tiles": s.ntiles, "reduce_steps": r["nsteps"],
                    "grid_order": list(s.grid_order), "partition": s.partition, "row_shared": s.lane,
                    "shared_by": s.share_width if s.lane else None,
                    "broadcast": [b.buf for b in s.boxes if b.shared], "reduce_order": list(s.red_order),
                    "double_buffered": bool(s.double_buffer), "simd": str(s.vector) if s.vector else None,
                    "blocked": [b.buf for b in s.boxes if b.blocked is not None],
                    "dma": dma, "compulsory_bytes": comp,
                    "modeled_seconds": modeled, "roofline_seconds": roof,
                    "dma_seconds": float(r["dma_seconds"][busiest]), "compute_seconds": float(r["compute_seconds"][busiest]),
                    "busy_cpes": int((r["tiles"] > 0).sum())})
    return out


# a shared box's form -> (CPEs one broadcast feeds, a CPE's place among them, emulator counter)
SHARE_FORMS = {"row": (8, lambda c: c % 8, "row_ibcast"), "col": (8, lambda c: c // 8 % 8, "col_ibcast"),
               "array": (64, lambda c: c % 64, "ibcast")}


def rma_entry(r):
    """The plan's `rma` counts of a kernel (as runtime/athread/src/rma.c counts them), if any:
    broadcasts along a row (`row_ibcast`), a column (`col_ibcast`) or to the array (`ibcast`),
    bytes read from the issuers' LDM, bytes landed in every member's."""
    ops, by = int(r["rma_ops"].sum()), int(r["rma_bytes"].sum())
    if not ops:
        return {}
    forms = {f: n for f, (n, _) in sorted(r["rma_forms"].items()) if n}
    return {"rma": {**forms, "bytes": by, "recv_bytes": sum(x for _, x in r["rma_forms"].values())}}


def _flops(k):
    try:
        return int(k.flops())
    except Exception:
        return 0


__all__ = ["simulate", "predict_kernel", "predict_program", "compulsory_bytes", "boxes_key", "Simulations"]
