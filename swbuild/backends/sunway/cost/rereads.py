"""Where a kernel's DMA exceeds its own compulsory bytes: per input box, the bytes the predictor
has it fetch from main memory against the bytes of the region it reads (each element once).

The excess of a box is what its tiling re-reads: weights fetched again for every pixel block of
the output, an input fetched again for every block of output channels that does not share it,
halos. `benchmarks/sunway_rereads.py` lists them over a model (issue 35's measurements).
A shared box counts on its issuing CPE only, as the predictor counts it (cost/predict.py), so
the boxes' bytes add up to the kernel's predicted gets less its parameter structs.
"""
from __future__ import annotations

import copy

from ..schedule.dma import box_plans
from .predict import compulsory_bytes, simulate


def box_rereads(k, cores):
    """[{buf, tensor, form, get_bytes, compulsory_bytes}] of compute kernel k's input boxes,
    in schedule order. `form`: how the box is shared (row, col, array) or None."""
    s = k.schedule
    out_box = next(b for b in s.boxes if b.context == "out")
    plain = box_plans(k)        # the layout before re-laid-out constants: the tensor's own extents
    rows = []
    for b in s.boxes:
        if b.context == "out":
            continue
        alone = copy.copy(k)
        alone.schedule = copy.copy(s)
        alone.schedule.boxes = [b, out_box]
        got = int(simulate(alone, cores, 0)["get_bytes"].sum())
        own = [p for p in plain if p.buf == b.buf and p.context != "out"]
        need = compulsory_bytes(k, boxes=own) - k.points * k.elem_bytes if own else 0
        form = b.share_form or (("row" if s.share_width == 8 else "array") if b.shared else None)
        rows.append({"buf": b.buf, "tensor": k.buffers[b.buf].tensor, "form": form,
                     "get_bytes": got, "compulsory_bytes": int(need)})
    return rows


__all__ = ["box_rereads"]
