"""The report as a table for people: one line per kernel (time, traffic, roofline fraction),
totals, and the few whole-model numbers worth a glance. `swbuild report --json` prints the
document itself; this reads only that document, so both always agree.
"""
from __future__ import annotations


def _mb(n):
    return f"{n / 1e6:.2f}"


def _flop(n):
    return f"{n / 1e9:.3g} GFLOP" if n >= 1e8 else f"{n / 1e6:.3g} MFLOP"


def _ms(s):
    return f"{s * 1e3:.3f}"


def _table(header, rows, total):
    """Columns sized to their content; the first two left-aligned, the rest right-aligned."""
    every = [header] + rows + [total]
    widths = [max(len(r[i]) for r in every) for i in range(len(header))]

    def line(r):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    rule = "-" * len(line(header))
    return [line(header), rule] + [line(r) for r in rows] + [rule, line(total)]


def _short(rep, name):
    return name.removeprefix(rep["model"] + "_") if "model" in rep else name


def sunway(rep):
    rows = []
    for k in rep["kernels"]:
        moved = (k["dma"]["measured"] or k["dma"]["predicted"])["bytes"]
        comp = k.get("compulsory_bytes", 0)
        rows.append([_short(rep, k["name"]), k["op"] + ("+" + "+".join(k["fused"]) if k.get("fused") else ""),
                     _ms(k["modeled_seconds"]), _mb(moved), f"{moved / comp:.2f}" if comp else "-",
                     f"{k['roofline_fraction']:.2f}", f"{k['ldm_peak_bytes'] or k['ldm_predicted_bytes']}",
                     "yes" if k["dma"]["match"] else ("-" if k["dma"]["measured"] is None else "NO")])
    measured = rep["dma"]["measured"]["bytes"] if rep.get("dma_match") is not None else 0
    total = ["total", f"{rep['kernel_launches']} kernels", _ms(rep["modeled_seconds"]), _mb(rep["main_memory_bytes"]),
             f"{rep['traffic_ratio']:.2f}" if rep.get("compulsory_bytes") else "-", f"{rep['roofline_fraction']:.2f}",
             f"{rep['ldm_peak_bytes']}", "yes" if rep.get("dma_match") else "NO"]
    head = ["kernel", "op", "model ms", "DMA MB", "x compulsory", "roofline", "LDM B", "DMA = plan"]
    lines = [f"{rep['model']} on {rep['target']}: {rep['kernel_launches']} kernels, {_flop(rep['flops'])}, "
             f"modelled {_ms(rep['modeled_seconds'])} ms (roofline {_ms(rep['roofline_seconds'])} ms, "
             f"fraction {rep['roofline_fraction']:.2f})"]
    lines += _table(head, rows, total)
    lines.append(f"main-memory traffic {_mb(rep['main_memory_bytes'])} MB ({'measured' if measured else 'predicted'}), "
                 f"compulsory {_mb(rep['compulsory_bytes'])} MB; mean DMA {rep['mean_dma_bytes']:.0f} B; "
                 f"arena {_mb(rep['arena_bytes'])} MB ({rep['arena_ratio']:.2f}x its lower bound); "
                 f"LDM peak {rep['ldm_peak_bytes']} of {rep['ldm_budget_bytes']} B; "
                 f"write conflicts {rep['write_conflicts']}")
    if rep.get("dma_mismatches"):
        lines.append(f"DMA differs from the plan in: {', '.join(rep['dma_mismatches'])}")
    if rep.get("ldm_over_budget"):
        lines.append(f"LDM over budget in: {', '.join(rep['ldm_over_budget'])}")
    return lines


def diannao(rep):
    rows = []
    for k in rep["kernels"]:
        rows.append([_short(rep, k["name"]), k["op"] + ("+" + "+".join(k["fused"]) if k.get("fused") else ""),
                     k["class"], f"{k['cycles']}", _ms(k["modeled_seconds"]), _mb(k.get("gdram_bytes", 0)),
                     f"{k.get('roofline_fraction', 0.0):.2f}", f"{k['tensorized_fraction']:.0%}", f"{k['violations']}"])
    total = ["total", f"{rep['kernel_launches']} kernels", "", f"{rep['cycles']}", _ms(rep["modeled_seconds"]),
             _mb(rep.get("gdram_bytes", 0)), f"{rep.get('roofline_fraction', 0.0):.2f}",
             f"{rep['tensorized_fraction']:.0%}", f"{rep['violations']}"]
    head = ["kernel", "op", "class", "cycles", "ms", "GDRAM MB", "roofline", "tensorized", "violations"]
    lines = [f"{rep['model']} on {rep['target']}: {rep['kernel_launches']} kernels, {_flop(rep['flops'])}, "
             f"{rep['cycles']} cycles = {_ms(rep['modeled_seconds'])} ms (partition {rep.get('partition', 'on')})"]
    lines += _table(head, rows, total)
    top = sorted(rep.get("instructions", {}).items(), key=lambda kv: -kv[1])[:6]
    lines.append("instructions: " + ", ".join(f"{n} {c}" for n, c in top)
                 + f"; on-chip declared NRAM {rep['nram_declared_bytes']} of {rep['nram_budget_bytes']} B, "
                   f"WRAM {rep['wram_declared_bytes']} B, SRAM {rep['sram_declared_bytes']} B")
    return lines


def mpi(doc):
    m = doc.get("model", {})
    lines = [f"MPI: {doc.get('ranks')} ranks, parallel {doc.get('parallel')}, batch {doc.get('batch')}"
             + (f"; modelled speed-up {m['speedup_over_one_core_group']:.2f}x over one core group"
                if "speedup_over_one_core_group" in m else "")]
    for r in doc.get("measured", {}).get("ranks", []):
        lines.append("  rank " + ", ".join(f"{k} {v}" for k, v in sorted(r.items()) if not isinstance(v, (dict, list))))
    return lines


def format_report(rep) -> str:
    lines = diannao(rep) if rep.get("family") == "diannao" else sunway(rep)
    if rep.get("mpi"):
        lines += mpi(rep["mpi"])
    lines.append("(swbuild report --json prints every number of the document)")
    return "\n".join(lines)
