"""The build report: per kernel and in total, what the compiler predicted (flops, DMA
operations and bytes, LDM, modelled and roofline seconds, from `cost/predict.py` and
`cost/model.py`) next to what the emulator measured (DMA operations and bytes, LDM peak,
write conflicts, emulated seconds).

`build_report(plan, stats, tc)` returns one JSON-able document; `plot_report` draws the
kernels on the target's roofline (as swTVM's roofline figure) and a per-kernel breakdown of
modelled DMA and compute time.
"""
from __future__ import annotations

from ..bound import bound_fields
from ..grouping_report import LABEL_POINTS, grouping_summary, shade_groups
from ..table import short
from .cost import model

dma_bandwidth = model.dma_bandwidth     # kept for callers of the first version
GROUPING_NOTE = ("consecutive grouped kernels share one athread_spawn, across group boundaries; intermediates go through main memory, except the "
                 "outputs of stitched producers (recomputed in their consumer's LDM, option stitch)")


def _zero():
    return {"get": {"ops": 0, "bytes": 0}, "put": {"ops": 0, "bytes": 0}}


def _tot(d):
    return {"ops": int(d["get"]["ops"] + d["put"]["ops"]), "bytes": int(d["get"]["bytes"] + d["put"]["bytes"])}


_NO_MESSAGES = {"puts": 0, "gets": 0}


_SCHEDULE_KEYS = ("tiles", "spatial_tiles", "reduce_steps", "grid_order", "partition", "row_shared", "shared_by", "broadcast",
                  "reduce_order", "double_buffered", "simd", "blocked", "busy_cpes", "kind", "group",
                  "prefetched", "prefetch_saved_seconds", "prefetches_for")


def _schedule(k):
    """The schedule keys a plan entry has (a special kernel or a launch has fewer)."""
    return {key: k[key] for key in _SCHEDULE_KEYS if key in k}


def _per_spawn(counts, spawns):
    """RMA counters per spawn, zeros dropped: a plan kernel without `rma` predicts none."""
    return {x: int(v) // spawns for x, v in counts.items() if int(v)}


def emulator_findings(plan, stats):
    """Per kernel, the emulator's counters against the compiler's plan: kernels whose measured
    DMA operations/bytes, register communication messages or RMA operations/bytes (per spawn;
    a plan kernel without `regcomm` / `rma` sends none) differ from the prediction, write conflicts (bytes written
    by two CPEs), races (bytes read by one CPE and written by another), the LDM peak and
    kernels whose LDM peak exceeds the plan's budget."""
    if stats is None:
        return {"stats": "missing"}
    meas = {k["name"]: k for k in stats.get("kernels", [])}
    mismatched, conflicts, races, peak, over = [], 0, 0, 0, []
    for k in plan["kernels"]:
        m = meas.get(k["name"])
        if m is None:
            mismatched.append({"kernel": k["name"], "measured": None, "predicted": k["dma"]})
            continue
        md = {d: {"ops": m["dma"][d]["ops"], "bytes": m["dma"][d]["bytes"]} for d in ("get", "put")}
        spawns = max(1, int(m.get("spawns", 1)))
        per_spawn = {d: {x: v // spawns for x, v in md[d].items()} for d in md}
        got_rc, want_rc = m.get("regcomm", _NO_MESSAGES), k.get("regcomm", _NO_MESSAGES)
        keys = sorted(set(got_rc) | set(want_rc))       # puts, gets and per direction: a key one side lacks is 0
        rc = {x: int(got_rc.get(x, 0)) // spawns for x in keys}
        want_rc = {x: int(want_rc.get(x, 0)) for x in keys}
        if per_spawn != {d: {x: k["dma"][d][x] for x in ("ops", "bytes")} for d in ("get", "put")}:
            mismatched.append({"kernel": k["name"], "measured": per_spawn, "predicted": k["dma"]})
        elif rc != want_rc:
            mismatched.append({"kernel": k["name"], "measured": dict(per_spawn, regcomm=rc),
                               "predicted": dict(k["dma"], regcomm=want_rc)})
        elif (rma := _per_spawn(m.get("rma", {}), spawns)) != _per_spawn(k.get("rma", {}), 1):
            mismatched.append({"kernel": k["name"], "measured": dict(per_spawn, rma=rma),
                               "predicted": dict(k["dma"], rma=_per_spawn(k.get("rma", {}), 1))})
        conflicts += int(m.get("write_conflicts", 0))
        races += int(m.get("races", 0))
        ldm = int(m.get("ldm_peak_bytes", 0))
        peak = max(peak, ldm)
        if k.get("ldm_budget") and ldm > int(k["ldm_budget"]):
            over.append({"kernel": k["name"], "ldm_peak_bytes": ldm, "ldm_budget": int(k["ldm_budget"])})
    return {"dma_mismatches": mismatched, "write_conflicts": conflicts, "races": races, "ldm_peak_bytes": peak,
            "ldm_over_budget": over}


def build_report(plan, stats, tc):
    hw = tc.hardware
    meas = {k["name"]: k for k in (stats or {}).get("kernels", [])}
    kernels = []
    tot = {"flops": 0, "pg": 0, "pb": 0, "mg": 0, "mb": 0, "mod": 0.0, "roof": 0.0, "conf": 0, "comp": 0,
           "emu": 0.0}
    peak_ldm = 0
    budget = max([int(k.get("ldm_budget", 0)) for k in plan["kernels"]] + [0]) or tc.ldm_budget
    mism, over = [], []
    for k in plan["kernels"]:
        m = meas.get(k["name"])
        spawns = max(1, int(m.get("spawns", 1))) if m else 1
        md = m["dma"] if m else _zero()
        per_spawn = {d: {x: int(v) // spawns for x, v in md[d].items() if x in ("ops", "bytes")} for d in ("get", "put")}
        measured = _tot(per_spawn) if m else None
        predicted = _tot(k["dma"])
        ldm = int(m.get("ldm_peak_bytes", 0)) if m else 0
        match = m is not None and per_spawn == {d: {x: int(k["dma"][d][x]) for x in ("ops", "bytes")} for d in ("get", "put")}
        if m is not None and not match:
            mism.append(k["name"])
        if ldm > int(k.get("ldm_budget", budget) or budget):
            over.append(k["name"])
        flops = int(k.get("flops", 0))
        comp = int(k.get("compulsory_bytes", 0))
        mod = float(k.get("modeled_seconds", 0.0))
        roof = float(k.get("roofline_seconds", model.roofline_seconds(hw, flops, comp)))
        entry = {"name": k["name"], "op": k["op"], "node": k.get("node", ""), "fused": k.get("fused", []),
                 "flops": flops, "dma": {"predicted": predicted, "measured": measured, "match": match,
                                         "predicted_get_put": k["dma"], "measured_get_put": per_spawn if m else None},
                 "mean_dma_bytes": (measured or predicted)["bytes"] / max(1, (measured or predicted)["ops"]),
                 "ldm_peak_bytes": ldm, "ldm_predicted_bytes": int(k.get("ldm_bytes", 0)),
                 "write_conflicts": int(m.get("write_conflicts", 0)) if m else 0,
                 "compulsory_bytes": comp,
                 "modeled_seconds": mod, "roofline_seconds": roof,
                 "roofline_fraction": roof / mod if mod else 0.0,
                 "dma_seconds": float(k.get("dma_seconds", 0.0)), "compute_seconds": float(k.get("compute_seconds", 0.0)),
                 "emulated_seconds": float(m.get("seconds", 0.0)) / spawns if m else None}
        entry.update(_schedule(k))
        if "kernels" in k:      # a grouped launch (stitch.py): its kernels' own numbers and schedules
            entry["kernels"] = [dict({x: sub.get(x, 0) for x in ("name", "op", "flops", "modeled_seconds", "roofline_seconds",
                                                                    "dma_seconds", "compute_seconds")},
                                     fused=list(sub.get("fused", ())), dma={"predicted": _tot(sub["dma"]), "measured": None},
                                     roofline_fraction=sub.get("roofline_seconds", 0.0) / sub["modeled_seconds"] if sub.get("modeled_seconds") else 0.0,
                                     **_schedule(sub)) for sub in k["kernels"]]
        kernels.append(entry)
        tot["flops"] += flops
        tot["pg"] += predicted["ops"]
        tot["pb"] += predicted["bytes"]
        tot["mg"] += (measured or {"ops": 0})["ops"]
        tot["mb"] += (measured or {"bytes": 0})["bytes"]
        tot["mod"] += mod
        tot["roof"] += roof
        tot["conf"] += entry["write_conflicts"]
        tot["comp"] += comp
        tot["emu"] += entry["emulated_seconds"] or 0.0
        peak_ldm = max(peak_ldm, ldm)
    measured_any = bool(meas)
    main = tot["mb"] if measured_any else tot["pb"]
    ops = tot["mg"] if measured_any else tot["pg"]
    return {
        "model": plan["model"], "target": plan["target"], "kernel_launches": len(plan["kernels"]),
        "flops": tot["flops"],
        "dma": {"predicted": {"ops": tot["pg"], "bytes": tot["pb"]},
                "measured": {"ops": tot["mg"], "bytes": tot["mb"]}},
        "dma_match": measured_any and not mism, "dma_mismatches": mism,
        "mean_dma_bytes": main / ops if ops else 0.0,
        "ldm_peak_bytes": peak_ldm, "ldm_budget_bytes": budget, "ldm_over_budget": over,
        "write_conflicts": tot["conf"],
        "arena_bytes": plan["arena_bytes"], "arena_lower_bound": plan["arena_lower_bound"],
        "arena_ratio": plan["arena_bytes"] / plan["arena_lower_bound"] if plan["arena_lower_bound"] else 1.0,
        "main_memory_bytes": main, "compulsory_bytes": tot["comp"],
        "traffic_ratio": main / tot["comp"] if tot["comp"] else 0.0,
        "model_compulsory_bytes": plan.get("model_compulsory_bytes", 0),
        "model_traffic_ratio": main / plan["model_compulsory_bytes"] if plan.get("model_compulsory_bytes") else 0.0,
        "grouping": grouping_summary(plan, GROUPING_NOTE),
        "modeled_seconds": tot["mod"], "roofline_seconds": tot["roof"],
        "roofline_fraction": tot["roof"] / tot["mod"] if tot["mod"] else 0.0,
        "emulated_seconds": tot["emu"],
        "peak_flops": model.peak_flops(hw), "roof_bytes_per_s": model.roof_bandwidth(hw),
        # the physical bound takes the memory's own bandwidth, not the attainable DMA roof above
        **bound_fields(tot["flops"], plan.get("model_compulsory_bytes", 0), model.peak_flops(hw),
                       float(hw["mem_bandwidth_bytes_per_s"]), tot["mod"]),
        "kernels": kernels,
    }


def plot_report(rep, tc, path):
    """Roofline of the model's kernels and a per-kernel time breakdown, as one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    hw = tc.hardware
    peak, bw = model.peak_flops(hw), model.roof_bandwidth(hw)
    rows = [sub for k in rep["kernels"] for sub in k.get("kernels", [k])]   # a grouped launch: its kernels
    # the bars get room for a legible label each (LABEL_POINTS at 120 dpi): wide models widen the figure
    fig, (a, b) = plt.subplots(1, 2, figsize=(7 + max(7.0, 0.2 * len(rows)), 5.5),
                               gridspec_kw={"width_ratios": [7, max(7.0, 0.2 * len(rows))]})
    xs = [10 ** (i / 10) for i in range(-30, 41)]
    a.loglog(xs, [min(peak, x * bw) / 1e9 for x in xs], "k-", label=f"roofline ({peak / 1e9:.0f} GFLOPS, {bw / 1e9:.1f} GB/s)")
    ops = sorted({k["op"] for k in rows})
    marks = "os^vD<>ph*x+"
    for i, op in enumerate(ops):
        pts = [(k["flops"] / max(1, (k["dma"]["measured"] or k["dma"]["predicted"])["bytes"]),
                k["flops"] / k["modeled_seconds"] / 1e9) for k in rows
               if k["op"] == op and k["flops"] and k["modeled_seconds"]]
        if pts:
            a.loglog([p[0] for p in pts], [p[1] for p in pts], marks[i % len(marks)], ms=5, label=op, alpha=0.8)
    a.set_xlabel("arithmetic intensity (flop / DMA byte)")
    a.set_ylabel("modelled GFLOPS")
    a.set_title(f"{rep['model']} on {rep['target']}")
    a.legend(fontsize=7)
    names = [short(rep, k["name"]) for k in rows]      # k3_conv: the table's names
    dma = [k["dma_seconds"] * 1e3 for k in rows]
    comp = [k["compute_seconds"] * 1e3 for k in rows]
    x = range(len(names))
    b.bar(x, dma, label="DMA (busiest CPE)", alpha=0.7)
    b.bar(x, comp, bottom=dma, label="compute (busiest CPE)", alpha=0.7)
    b.plot(x, [k["modeled_seconds"] * 1e3 for k in rows], "k.", label="modelled (overlapped)")
    b.plot(x, [k["roofline_seconds"] * 1e3 for k in rows], "r_", label="roofline bound")
    shade_groups(b, rep, [[k["name"]] for k in rows])
    b.set_xticks(list(x), names, rotation=90, fontsize=LABEL_POINTS)
    b.set_ylabel("ms")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
