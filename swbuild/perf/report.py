"""The build report: predicted vs measured numbers per kernel, cost model and roofline.

Every number of the model comes from the toolchain file: the DMA bandwidth curve measured on
the chip (shared by the CPEs of a core group), the clock and issue rates of the generated
inner loops (scalar multiply-adds, not the chip's SIMD peak), and the spawn overhead.
"""
from __future__ import annotations

import bisect
import math


def dma_bandwidth(hw, block_bytes):
    """Core-group DMA bandwidth (bytes/s) for transfers of `block_bytes`: the measured curve,
    interpolated in log(size), with the fitted law above its last point."""
    curve = sorted(hw["dma_curve"])
    sizes = [c[0] for c in curve]
    if block_bytes <= sizes[0]:
        return curve[0][1] * block_bytes / sizes[0]
    if block_bytes >= sizes[-1]:
        peak, half = float(hw["dma_fit_peak_bytes_per_s"]), float(hw["dma_fit_half_bytes"])
        return max(curve[-1][1], peak * block_bytes / (block_bytes + half))
    i = bisect.bisect_right(sizes, block_bytes)
    (s0, b0), (s1, b1) = curve[i - 1], curve[i]
    f = (math.log(block_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return b0 + f * (b1 - b0)


def kernel_model(k, hw):
    """Modeled seconds of one kernel on the target, and its roofline bound."""
    cores = int(hw["cpes"])
    clock = float(hw["clock_hz"])
    dma = k["dma"]
    ops = dma["get"]["ops"] + dma["put"]["ops"]
    by = dma["get"]["bytes"] + dma["put"]["bytes"]
    mean = by / ops if ops else 0
    dma_s = by / dma_bandwidth(hw, mean) if by else 0.0
    used = min(cores, max(1, k.get("spatial_tiles", cores)))
    # generated inner loops: one scalar multiply-add (2 flops) per cycle per CPE
    fma = float(hw.get("fma_per_cycle_scalar", 1))
    comp_s = k["flops"] / (2.0 * fma * clock * used)
    spawn = float(hw.get("spawn_seconds", 0))
    modeled = spawn + max(dma_s, comp_s) if k.get("double_buffered") else spawn + dma_s + comp_s
    peak = float(hw["peak_flops_per_cpe"]) * cores
    bw = float(hw["mem_bandwidth_bytes_per_s"])
    roof = max(k["flops"] / peak, k.get("compulsory_bytes", 0) / bw)
    return {"modeled_seconds": modeled, "dma_seconds": dma_s, "compute_seconds": comp_s,
            "roofline_seconds": roof, "mean_dma_bytes": mean}


def build_report(plan, stats, tc):
    hw = tc.hardware
    meas = {k["name"]: k for k in (stats or {}).get("kernels", [])}
    kernels = []
    tot = {"flops": 0, "pg": 0, "pb": 0, "mg": 0, "mb": 0, "mod": 0.0, "roof": 0.0, "conf": 0, "comp": 0}
    peak_ldm = 0
    for k in plan["kernels"]:
        m = meas.get(k["name"], {})
        spawns = max(1, int(m.get("spawns", 1)))
        md = m.get("dma", {"get": {"ops": 0, "bytes": 0}, "put": {"ops": 0, "bytes": 0}})
        measured = {"ops": (md["get"]["ops"] + md["put"]["ops"]) // spawns,
                    "bytes": (md["get"]["bytes"] + md["put"]["bytes"]) // spawns}
        predicted = {"ops": k["dma"]["get"]["ops"] + k["dma"]["put"]["ops"],
                     "bytes": k["dma"]["get"]["bytes"] + k["dma"]["put"]["bytes"]}
        cm = kernel_model(k, hw)
        ldm = int(m.get("ldm_peak_bytes", 0))
        kernels.append({"name": k["name"], "op": k["op"], "node": k["node"], "fused": k.get("fused", []),
                        "flops": k["flops"], "dma": {"predicted": predicted, "measured": measured},
                        "ldm_peak_bytes": ldm, "ldm_predicted_bytes": k["ldm_bytes"],
                        "write_conflicts": int(m.get("write_conflicts", 0)),
                        "modeled_seconds": cm["modeled_seconds"], "roofline_seconds": cm["roofline_seconds"],
                        "dma_seconds": cm["dma_seconds"], "compute_seconds": cm["compute_seconds"],
                        "compulsory_bytes": k.get("compulsory_bytes", 0)})
        tot["flops"] += k["flops"]
        tot["pg"] += predicted["ops"]
        tot["pb"] += predicted["bytes"]
        tot["mg"] += measured["ops"]
        tot["mb"] += measured["bytes"]
        tot["mod"] += cm["modeled_seconds"]
        tot["roof"] += cm["roofline_seconds"]
        tot["conf"] += kernels[-1]["write_conflicts"]
        peak_ldm = max(peak_ldm, ldm)
    return {
        "model": plan["model"], "target": plan["target"], "kernel_launches": len(plan["kernels"]),
        "flops": tot["flops"],
        "dma": {"predicted": {"ops": tot["pg"], "bytes": tot["pb"]}, "measured": {"ops": tot["mg"], "bytes": tot["mb"]}},
        "mean_dma_bytes": tot["mb"] / tot["mg"] if tot["mg"] else 0.0,
        "ldm_peak_bytes": peak_ldm, "ldm_budget_bytes": tc.ldm_budget,
        "write_conflicts": tot["conf"],
        "arena_bytes": plan["arena_bytes"], "arena_lower_bound": plan["arena_lower_bound"],
        "main_memory_bytes": tot["mb"], "compulsory_bytes": plan.get("compulsory_bytes", 0),
        "modeled_seconds": tot["mod"], "roofline_seconds": tot["roof"],
        "kernels": kernels,
    }


def plot_report(rep, tc, path):
    """Roofline of the model's kernels and a per-kernel time breakdown, as one PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    hw = tc.hardware
    peak = float(hw["peak_flops_per_cpe"]) * int(hw["cpes"])
    bw = float(hw["mem_bandwidth_bytes_per_s"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5))
    xs = [10 ** (i / 10) for i in range(-20, 41)]
    a.loglog(xs, [min(peak, x * bw) / 1e9 for x in xs], "k-", label="roofline")
    for k in rep["kernels"]:
        by = max(1, k["dma"]["measured"]["bytes"])
        if k["flops"] and k["modeled_seconds"]:
            a.loglog(k["flops"] / by, k["flops"] / k["modeled_seconds"] / 1e9, "o", ms=4)
    a.set_xlabel("arithmetic intensity (flop / DMA byte)")
    a.set_ylabel("GFLOPS")
    a.set_title(f"{rep['model']} on {rep['target']}")
    a.legend()
    names = [k["name"].split("_k", 1)[-1] for k in rep["kernels"]]
    dma = [k["dma_seconds"] * 1e3 for k in rep["kernels"]]
    comp = [k["compute_seconds"] * 1e3 for k in rep["kernels"]]
    b.bar(range(len(names)), dma, label="DMA")
    b.bar(range(len(names)), comp, bottom=dma, label="compute")
    b.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
    b.set_ylabel("modeled ms")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
