"""Sunway builds in words: the `swbuild report` table and a kernel's line in `swbuild ops`."""
from __future__ import annotations

from ..bound import bound_line
from ..grouping_report import grouping_lines, traffic_line
from ..table import flop, kernels_text, mb, ms, op_text, short, table

OPS_NOTE = "every operator runs as CPE kernels (LDM tiles, DMA); a kernel whose working set cannot fit the LDM is refused"


def kernel_note(k):
    """A plan kernel, for `swbuild ops`: CPEs busy, LDM use, SIMD."""
    ldm = f"LDM {k['ldm_bytes']} of {k['ldm_budget']} B" if "ldm_bytes" in k else ""
    cpes = f"{k['busy_cpes']} CPEs" if "busy_cpes" in k else "CPE kernel"
    return ", ".join(x for x in (cpes, ldm, "SIMD" if str(k.get("simd", "")).startswith("simd") else "") if x)


def report_lines(rep):
    rows = []
    for k in rep["kernels"]:
        moved = (k["dma"]["measured"] or k["dma"]["predicted"])["bytes"]
        comp = k.get("compulsory_bytes", 0)
        rows.append([short(rep, k["name"]), op_text(k), ms(k["modeled_seconds"]), mb(moved),
                     f"{moved / comp:.2f}" if comp else "-", f"{k['roofline_fraction']:.2f}",
                     f"{k['ldm_peak_bytes'] or k['ldm_predicted_bytes']}",
                     "yes" if k["dma"]["match"] else ("-" if k["dma"]["measured"] is None else "NO")])
        for sub in k.get("kernels", ()):    # a grouped launch: its kernels' predicted numbers
            rows.append(["  " + short(rep, sub["name"]), op_text(sub), ms(sub["modeled_seconds"]),
                         mb(sub["dma"]["predicted"]["bytes"]), "", "", "", ""])
    total = ["total", kernels_text(rep, launches=False), ms(rep["modeled_seconds"]), mb(rep["main_memory_bytes"]),
             f"{rep['traffic_ratio']:.2f}" if rep.get("compulsory_bytes") else "-", f"{rep['roofline_fraction']:.2f}",
             f"{rep['ldm_peak_bytes']}", "yes" if rep.get("dma_match") else "NO"]
    head = ["kernel", "op", "model ms", "DMA MB", "x compulsory", "roofline", "LDM B", "DMA = plan"]
    measured = any(k["dma"]["measured"] is not None for k in rep["kernels"])
    lines = [f"{rep['model']} on {rep['target']}: {kernels_text(rep)}, {flop(rep['flops'])}, "
             f"modelled {ms(rep['modeled_seconds'])} ms (roofline {ms(rep['roofline_seconds'])} ms, "
             f"fraction {rep['roofline_fraction']:.2f})"]
    lines += table(head, rows, total)
    lines.append(f"main-memory traffic {mb(rep['main_memory_bytes'])} MB ({'measured' if measured else 'predicted'}), "
                 f"compulsory {mb(rep['compulsory_bytes'])} MB; mean DMA {rep['mean_dma_bytes']:.0f} B; "
                 f"arena {mb(rep['arena_bytes'])} MB ({rep['arena_ratio']:.2f}x its lower bound); "
                 f"LDM peak {rep['ldm_peak_bytes']} of {rep['ldm_budget_bytes']} B; "
                 f"write conflicts {rep['write_conflicts']}")
    if rep.get("dma_mismatches"):
        lines.append(f"DMA differs from the plan in: {', '.join(rep['dma_mismatches'])}")
    if rep.get("ldm_over_budget"):
        lines.append(f"LDM over budget in: {', '.join(rep['ldm_over_budget'])}")
    return lines + traffic_line(rep) + bound_line(rep) + grouping_lines(rep)
