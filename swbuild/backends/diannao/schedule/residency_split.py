"""Element-wise kernels split like the convolutions that read them (option `residency_split`,
issue 34), so their outputs can stay in SRAM (residency.py).

SRAM is per cluster: an intermediate stays on chip only where every cluster reads back what
its own cores wrote. An element-wise kernel splits its axis 0 (an NHWC tensor's pixels) in 16
equal chunks, ceil(pixels / 16) each; a rows-mode convolution gives each task ceil(NRT / 16)
row tiles of R rows. The two differ (56 x 56 pixels: 196 against 4 rows = 224 per task), so
DenseNet's BatchNorm + Relu outputs, read by 1x1 convolutions, went through GDRAM: written once
and read once by every layer of a dense block. Here such a producer takes its readers' rows
per task as its chunk (in axis-0 units: rows x pixels per row); the last tasks may then get
less or no work (14 of 16 busy at 56 rows), which the element-wise kernel, bound by its
copies, pays in time. An element-wise kernel whose readers give no such split but that reads an
in-place Concat (a transition's BatchNorm before a clusters-mode convolution) takes the split
of the Concat's writers instead, so that the Concat may stay in SRAM (residency_concat.py).
Whether a tensor then stays on chip is the residency passes' check on the final device IR,
never assumed here.
"""
from __future__ import annotations

from ....ir.sizes import ceil_div


def chunk_hints(program, dev, concats=True):
    """{element-wise kernel name: elements of its axis 0 per task} for the kernels whose output
    (an intermediate: not a graph input or output, not a Concat slice or container) is read only
    by rows-mode convolutions that agree on their rows per task, or else that read an in-place
    Concat whose writers are all rows-mode convolutions or pools agreeing on theirs."""
    g = program.graph
    skip = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    skip |= {program.root(t) for t in program.slices} | {program.root(c) for c, _ in program.slices.values()}
    members = set(program.slices) | {c for c, _ in program.slices.values()}
    writer, readers = {}, {}
    for dk in dev:
        if dk.kernel is None:
            continue
        out = program.root(dk.kernel.buffers[dk.kernel.out].tensor)
        writer.setdefault(out, []).append(dk)
        for _, ref in dk.params:
            if ref[0] == "tensor" and ref[1] != out:
                readers.setdefault(ref[1], []).append(dk)

    def rows_of(ks):
        """Rows per task of kernels that all split rows over the 16 tasks, else None."""
        if not ks or any(x.cls not in ("conv", "pool") or x.info.get("mode") != "rows" for x in ks):
            return None
        rows = {ceil_div(x.info["NRT"], 16) * x.info["R"] for x in ks}
        return rows.pop() if len(rows) == 1 else None

    def container_writers(t):
        """The writers of every member of the in-place Concat t lives in (concat_slices.py)."""
        while t in program.slices:
            t = program.slices[t][0]
        mem = {t} | {m for m in program.slices if _outer(program, m) == t}
        return [w for m in mem for w in writer.get(m, [])]

    hints = {}
    for dk in dev:
        if dk.cls != "elementwise" or "tile" not in dk.info or dk.kernel is None:
            continue
        out = program.root(dk.kernel.buffers[dk.kernel.out].tensor)
        rd = readers.get(out, [])
        r = rows_of(rd) if out not in skip and len(writer[out]) == 1 and all(x.cls == "conv" for x in rd) else None
        if r is None and concats:
            # else (option sram_concats) as the writers of a Concat it reads (a transition's
            # BatchNorm before a clusters-mode convolution): its reads then match theirs, so
            # the Concat may stay in SRAM
            ins = {ref[1] for _, ref in dk.params if ref[0] == "tensor" and ref[1] != out and ref[1] in members}
            r = rows_of(container_writers(ins.pop())) if len(ins) == 1 else None
        shape = tuple(g.tensors[out].shape)
        axes = list(dk.info["tile"]["axes"])
        # the tile's axes are NHWC's: pixels (row-major) outer, channels inner
        if r is None or len(shape) != 4 or shape[0] != 1 or axes != [shape[2] * shape[3], shape[1]]:
            continue
        hint = r * shape[3]
        if hint * 16 >= axes[0] and hint != dk.info["tile"]["chunk"]:
            hints[dk.name] = hint
    return hints


def _outer(program, t):
    """The outermost Concat t lives in (t itself when none)."""
    while t in program.slices:
        t = program.slices[t][0]
    return t
