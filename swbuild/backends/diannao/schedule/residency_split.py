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
copies, pays in time. Whether the tensor then stays on chip is residency.py's check on the
final device IR, never assumed here.
"""
from __future__ import annotations

from ....ir.sizes import ceil_div


def chunk_hints(program, dev):
    """{element-wise kernel name: elements of its axis 0 per task} for the kernels whose output
    (an intermediate: not a graph input or output, not a Concat slice or container) is read only
    by rows-mode convolutions that agree on their rows per task."""
    g = program.graph
    skip = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    skip |= {program.root(t) for t in program.slices} | {program.root(c) for c, _ in program.slices.values()}
    writer, readers = {}, {}
    for dk in dev:
        if dk.kernel is None:
            continue
        out = program.root(dk.kernel.buffers[dk.kernel.out].tensor)
        writer.setdefault(out, []).append(dk)
        for _, ref in dk.params:
            if ref[0] == "tensor" and ref[1] != out:
                readers.setdefault(ref[1], []).append(dk)
    hints = {}
    for dk in dev:
        if dk.cls != "elementwise" or "tile" not in dk.info or dk.kernel is None:
            continue
        out = program.root(dk.kernel.buffers[dk.kernel.out].tensor)
        rd = readers.get(out, [])
        if out in skip or len(writer[out]) != 1 or not rd or any(
                r.cls != "conv" or r.info.get("mode") != "rows" for r in rd):
            continue
        rows = {ceil_div(r.info["NRT"], 16) * r.info["R"] for r in rd}
        shape = tuple(g.tensors[out].shape)
        axes = list(dk.info["tile"]["axes"])
        # the tile's axes are NHWC's: pixels (row-major) outer, channels inner
        if len(rows) != 1 or len(shape) != 4 or shape[0] != 1 or axes != [shape[2] * shape[3], shape[1]]:
            continue
        ext0 = axes[0]
        hint = rows.pop() * shape[3]
        if hint * 16 >= ext0 and hint != dk.info["tile"]["chunk"]:
            hints[dk.name] = hint
    return hints
