"""Plain-text tables for people (the `swbuild report` table, `swbuild ops`): columns sized to
their content, numbers right-aligned, and the units every family prints them in."""
from __future__ import annotations


def mb(n):
    return f"{n / 1e6:.2f}"


def ms(s):
    return f"{s * 1e3:.3f}"


def kernel_count(rep):
    """Kernels of a report: a grouped launch (op Group) counts its kernels, not itself."""
    return sum(len(k["kernels"]) if k.get("kernels") else 1 for k in rep["kernels"])


def kernels_text(rep, launches=True):
    """`4 kernels`, or `4 kernels in 1 launch` when groups share launches."""
    n, m = kernel_count(rep), rep["kernel_launches"]
    text = f"{n} kernel{'s' if n != 1 else ''}"
    return text + (f" in {m} launch{'es' if m != 1 else ''}" if launches and m != n else "")


def flop(n):
    return f"{n / 1e9:.3g} GFLOP" if n >= 1e8 else f"{n / 1e6:.3g} MFLOP"


def short(rep, name):
    """A kernel's name without the model's prefix (k3_conv)."""
    return name.removeprefix(rep["model"] + "_") if "model" in rep else name


def op_text(k):
    if k["op"] == "Group":      # a grouped launch (stitch.py): the table lists its kernels under it
        return f"Group of {len(k.get('fused', ()))}"
    return k["op"] + ("+" + "+".join(k["fused"]) if k.get("fused") else "")


def table(header, rows, total):
    """Header, rule, rows, rule, total; the first two columns left-aligned, the rest right."""
    every = [header] + rows + [total]
    widths = [max(len(r[i]) for r in every) for i in range(len(header))]

    def line(r):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    rule = "-" * len(line(header))
    return [line(header), rule] + [line(r) for r in rows] + [rule, line(total)]
