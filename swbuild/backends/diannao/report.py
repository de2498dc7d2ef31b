"""The `swbuild report` document of a DianNao build and the emulator findings `swbuild
check` reads: the plan's statements (how many the mapper tensorized) joined with the BANG
emulator's statistics (cycles, instructions by intrinsic, bytes copied per direction,
on-chip peaks, rule violations).
"""
from __future__ import annotations

from ..bound import bound_fields
from ..grouping_report import LABEL_POINTS, grouping_summary, shade_groups

GROUPING_NOTE = ("a group's kernels share one launch, __sync_all between them; intermediates still go through GDRAM "
                 "(buffer stitching in NRAM/SRAM is not done)")


def copy_mismatches(plan, stats):
    """Launches whose copied bytes per direction (the emulator's counters, per launch) differ
    from the plan's prediction (traffic.py); a launch the plan could not predict is listed
    with its reason, never taken as a match."""
    meas = {k["name"]: k for k in (stats or {}).get("kernels", [])}
    out = []
    for k in plan["kernels"]:
        m = meas.get(k["name"])
        if m is None:
            continue
        launches = max(1, int(m.get("launches", 1)))
        measured = {d: int(v) // launches for d, v in sorted(m.get("memcpy_bytes", {}).items()) if int(v)}
        exact = all(int(v) % launches == 0 for v in m.get("memcpy_bytes", {}).values())
        if k.get("copy_bytes") is None:
            out.append({"kernel": k["name"], "measured": measured, "predicted": None,
                        "why": k.get("copy_bytes_unpredicted", "no prediction in the plan")})
        elif not exact or measured != k["copy_bytes"]:
            out.append({"kernel": k["name"], "measured": measured, "predicted": k["copy_bytes"]})
    return out


def emulator_findings(plan, stats):
    """Rule violations and cycles; kernels of the plan the emulator never saw; launches whose
    copied bytes differ from the plan's."""
    if stats is None:
        return {"stats": "missing"}
    seen = {k["name"] for k in stats.get("kernels", [])}
    return {"violations": int(stats.get("violations", 0)),
            "copy_mismatches": copy_mismatches(plan, stats),
            "write_conflicts": sum(int(k.get("write_conflicts", 0)) for k in stats.get("kernels", [])),
            "cycles": sum(int(k.get("cycles", 0)) for k in stats.get("kernels", [])),
            "missing_kernels": [k["name"] for k in plan["kernels"] if k["name"] not in seen],
            "nram_declared_bytes": stats.get("nram_declared_bytes", 0),
            "wram_declared_bytes": stats.get("wram_declared_bytes", 0),
            "sram_declared_bytes": stats.get("sram_declared_bytes", 0)}


def _add(into, d):
    for k, v in d.items():
        into[k] = into.get(k, 0) + int(v)


RATES = {1: "conv_int8_macs_per_cycle", 2: "conv_int16_macs_per_cycle"}   # schedule/integer.py fixed_point


def peak_flops(hw, fixed_point=0):
    """The machine's roof: every core's convolution unit at full rate, fp32 or (fixed_point 1 /
    2) the int8 / int16 rate of a fixed-point __bang_conv."""
    rate = float(hw.get(RATES.get(fixed_point, "conv_float_macs_per_cycle"), 0))
    return 2.0 * rate * int(hw.get("cores", 1)) * float(hw.get("clock_hz", 1e9))


def compute_seconds(hw, k):
    """A plan kernel's flops at its own roof (an int8 convolution's at the int8 rate); a merged
    launch's, the sum of its kernels'."""
    subs = k.get("kernels") or [k]
    peaks = [peak_flops(hw, s.get("schedule", {}).get("fixed_point", 0)) for s in subs]
    return sum(s["flops"] / p for s, p in zip(subs, peaks) if p)


def roofline_seconds(hw, compute, gdram_bytes):
    bw = float(hw.get("mem_bandwidth_bytes_per_s", 0))
    return max(compute, gdram_bytes / bw if bw else 0.0)


def gdram_bytes(memcpy_bytes):
    """Off-chip traffic: the bytes of every copy to or from GDRAM."""
    return sum(int(v) for d, v in memcpy_bytes.items() if "GDRAM" in d)


def build_report(plan, stats, tc):
    meas = {k["name"]: k for k in (stats or {}).get("kernels", [])}
    hw = tc.hardware
    clock = float(hw.get("clock_hz", 1e9))
    kernels, instr, icycles, mbytes = [], {}, {}, {}
    cycles = flops = compute = 0
    for k in plan["kernels"]:
        m = meas.get(k["name"], {})
        c = int(m.get("cycles", 0))
        cycles += c
        flops += k["flops"]
        _add(instr, m.get("instructions", {}))
        _add(mbytes, m.get("memcpy_bytes", {}))
        _add(icycles, m.get("instruction_cycles", {}))
        n = k["compute_statements"]
        traffic = gdram_bytes(m.get("memcpy_bytes", {}))
        kcompute = compute_seconds(hw, k)
        compute += kcompute
        roof = roofline_seconds(hw, kcompute, traffic)
        kernels.append({"name": k["name"], "op": k["op"], "node": k["node"], "fused": k["fused"], "class": k["class"],
                        "flops": k["flops"], "cycles": c, "launches": int(m.get("launches", 0)),
                        "modeled_seconds": c / clock,
                        "instructions": dict(sorted(m.get("instructions", {}).items())),
                        "instruction_cycles": dict(sorted(m.get("instruction_cycles", {}).items())),
                        "memcpy_bytes": dict(sorted(m.get("memcpy_bytes", {}).items())),
                        "gdram_bytes": traffic, "roofline_seconds": roof,
                        "predicted_gdram_bytes": (gdram_bytes(k["copy_bytes"]) if k.get("copy_bytes") is not None
                                                  else None),
                        "roofline_fraction": roof / (c / clock) if c else 0.0,
                        "compute_statements": n, "tensorized_statements": k["tensorized_statements"],
                        "tensorized_fraction": k["tensorized_statements"] / n if n else 1.0,
                        "scalar_statements": k["scalar_statements"], "schedule": k.get("schedule", {}),
                        "nram_peak_bytes": int(m.get("nram_peak_bytes", 0)),
                        "wram_peak_bytes": int(m.get("wram_peak_bytes", 0)),
                        "sram_peak_bytes": int(m.get("sram_peak_bytes", 0)),
                        "nram_planned_bytes": k["nram_bytes"], "violations": int(m.get("violations", 0)),
                        **({"group": k["group"], "kernels": [{**{x: sub[x] for x in ("name", "op", "node", "fused", "class",
                                                                                     "flops")},
                                                             "schedule": sub.get("schedule", {})} for sub in k["kernels"]]}
                           if k["op"] == "Group" else {})})
    main = gdram_bytes(mbytes)
    return {
        "model": plan["model"], "target": plan["target"], "family": "diannao", "partition": plan.get("partition", "on"),
        "kernel_launches": len(plan["kernels"]), "flops": flops,
        "cycles": cycles, "modeled_seconds": cycles / clock,
        "instructions": dict(sorted(instr.items())), "instruction_cycles": dict(sorted(icycles.items())),
        "memcpy_bytes": dict(sorted(mbytes.items())), "gdram_bytes": main,
        "predicted_gdram_bytes": sum(k["predicted_gdram_bytes"] or 0 for k in kernels),
        "copy_mismatches": [m["kernel"] for m in copy_mismatches(plan, stats)] if stats else [],
        "main_memory_bytes": main, "model_compulsory_bytes": plan.get("model_compulsory_bytes", 0),
        "model_traffic_ratio": main / plan["model_compulsory_bytes"] if plan.get("model_compulsory_bytes") else 0.0,
        "grouping": grouping_summary(plan, GROUPING_NOTE),
        "roofline_seconds": sum(k["roofline_seconds"] for k in kernels),
        "roofline_fraction": sum(k["roofline_seconds"] for k in kernels) / (cycles / clock) if cycles else 0.0,
        "peak_flops": peak_flops(hw), "roof_bytes_per_s": float(hw.get("mem_bandwidth_bytes_per_s", 0)),
        **bound_fields(flops, plan.get("model_compulsory_bytes", 0), peak_flops(hw),
                       float(hw.get("mem_bandwidth_bytes_per_s", 0)), cycles / clock, compute),
        "tensorized_fraction": plan["tensorized_fraction"], "compute_statements": plan["compute_statements"],
        "tensorized_statements": plan["tensorized_statements"],
        "violations": int((stats or {}).get("violations", 0)),
        "nram_declared_bytes": (stats or {}).get("nram_declared_bytes", 0),
        "wram_declared_bytes": (stats or {}).get("wram_declared_bytes", 0),
        "sram_declared_bytes": (stats or {}).get("sram_declared_bytes", 0),
        "nram_budget_bytes": tc.nram_budget,
        "arena_bytes": plan["arena_bytes"], "arena_lower_bound": plan["arena_lower_bound"],
        "kernels": kernels,
    }


# Instruction classes of the plot: each intrinsic's cycles go to the first class whose
# prefixes match (the stats name every intrinsic the emulator counts).
CLASSES = (("convolution", ("__bang_conv",)), ("pooling", ("__bang_maxpool", "__bang_avgpool")),
           ("vector", ("__bang_",)), ("copy", ("__memcpy", "__memset")), ("barrier", ("__sync",)),
           ("scalar", ("scalar_ops",)))


def class_of(intrinsic):
    return next((c for c, prefixes in CLASSES if intrinsic.startswith(prefixes)), "other")


def plot_report(rep, tc, path):
    """Cycles by kernel, each bar split by instruction class (convolution, pooling, vector,
    copy, barrier, scalar C) in the proportions of the cycles those instructions charged across the
    cores, then the launch and what no instruction charged (waiting at barriers)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [k["name"].removeprefix(rep["model"] + "_") for k in rep["kernels"]]
    launch = float(tc.hardware.get("launch_cycles", 0))
    parts = {c: [] for c, _ in CLASSES}
    parts["launch"], parts["waiting"] = [], []
    for k in rep["kernels"]:
        charged = {c: 0 for c, _ in CLASSES}
        for ins, cyc in k.get("instruction_cycles", {}).items():
            charged[class_of(ins)] = charged.get(class_of(ins), 0) + cyc
        busy = max(0.0, k["cycles"] - launch * k["launches"])
        total = sum(charged.values())
        share = {c: v / total for c, v in charged.items()} if total else {}
        # the tasks' charged cycles overlap (16 cores, asynchronous copies): scale them to
        # the kernel's measured cycles less the launch, never above them
        covered = min(busy, total)
        for c, _ in CLASSES:
            parts[c].append(share.get(c, 0.0) * covered)
        parts["launch"].append(min(k["cycles"], launch * k["launches"]))
        parts["waiting"].append(max(0.0, busy - covered))
    fig, ax = plt.subplots(figsize=(max(8, 0.25 * len(names) + 3), 5))
    bottom = [0.0] * len(names)
    for c, ys in parts.items():
        if any(ys):
            ax.bar(range(len(names)), ys, bottom=bottom, label=c)
            bottom = [b + y for b, y in zip(bottom, ys)]
    shade_groups(ax, rep, [k["fused"] if k["op"] == "Group" else [k["name"]] for k in rep["kernels"]])
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=LABEL_POINTS)
    ax.set_ylabel("emulated cycles")
    ax.set_title(f"{rep['model']} on {rep['target']}: {rep['cycles']} cycles, tensorized "
                 f"{rep['tensorized_fraction']:.0%} of the compute statements")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
