"""DianNao builds in words: the `swbuild report` table and a kernel's line in `swbuild ops`."""
from __future__ import annotations

from ..bound import bound_line
from ..grouping_report import grouping_lines, traffic_line
from ..table import flop, kernels_text, mb, ms, op_text, short, table
from .schedule import CONV_OPS, INTEGER_OPS, POOL_OPS

OPS_NOTE = (f"{', '.join(CONV_OPS + tuple(INTEGER_OPS))} map to __bang_conv, {', '.join(POOL_OPS)} to __bang_*pool, kernels without "
            "a reduction, LRN and max/sum over a contiguous axis to vector __bang_* instructions; other reductions "
            "and index lookups run as scalar device code")


def kernel_note(k):
    """A plan kernel, for `swbuild ops`: its class, tensorized (with which intrinsics) or scalar and why."""
    cls = k.get("class", "?")
    if cls == "scalar":
        why = k.get("schedule", {}).get("why")
        return f"scalar device code, not tensorized{f' ({why})' if why else ''}"
    return f"{cls}, tensorized ({', '.join(sorted(i for i in k.get('static_instructions', {}) if i.startswith('__bang')))})"


def report_lines(rep):
    rows = []
    for k in rep["kernels"]:
        rows.append([short(rep, k["name"]), op_text(k), k["class"], f"{k['cycles']}", ms(k["modeled_seconds"]),
                     mb(k.get("gdram_bytes", 0)), f"{k.get('roofline_fraction', 0.0):.2f}",
                     f"{k['tensorized_fraction']:.0%}", f"{k['violations']}"])
        for sub in k.get("kernels", ()):    # a grouped launch: its kernels (the emulator counts the launch)
            rows.append(["  " + short(rep, sub["name"]), op_text(sub), sub["class"], "", "", "", "", "", ""])
    total = ["total", kernels_text(rep, launches=False), "", f"{rep['cycles']}", ms(rep["modeled_seconds"]),
             mb(rep.get("gdram_bytes", 0)), f"{rep.get('roofline_fraction', 0.0):.2f}",
             f"{rep['tensorized_fraction']:.0%}", f"{rep['violations']}"]
    head = ["kernel", "op", "class", "cycles", "ms", "GDRAM MB", "roofline", "tensorized", "violations"]
    lines = [f"{rep['model']} on {rep['target']}: {kernels_text(rep)}, {flop(rep['flops'])}, "
             f"{rep['cycles']} cycles = {ms(rep['modeled_seconds'])} ms (partition {rep.get('partition', 'on')})"]
    lines += table(head, rows, total)
    top = sorted(rep.get("instructions", {}).items(), key=lambda kv: -kv[1])[:6]
    lines.append("instructions: " + ", ".join(f"{n} {c}" for n, c in top)
                 + f"; on-chip declared NRAM {rep['nram_declared_bytes']} of {rep['nram_budget_bytes']} B, "
                   f"WRAM {rep['wram_declared_bytes']} B, SRAM {rep['sram_declared_bytes']} B")
    if rep.get("copy_mismatches"):
        lines.append(f"bytes copied differ from the plan's prediction in: {', '.join(rep['copy_mismatches'])}")
    return lines + traffic_line(rep) + bound_line(rep) + grouping_lines(rep)
