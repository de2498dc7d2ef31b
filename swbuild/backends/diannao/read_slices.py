"""Channel slices read in place on NHWC storage (a graph pass of the DianNao backend, issue 36).

The mirror of concat_slices.py: a kernel that only copies channels [c0, c0 + C) of an NHWC
tensor x into a tensor s of its own (ops/quant_split.py's half-channel inputs of layer4's
wide convolutions) is dropped, and s lives *inside* x: at channel c0 of x's pixel 0
(`program.slices`) with x's pixel pitch (`DianNaoState.storage_shapes`). Its readers (the
half convolutions) then copy C channels per pixel with stride C_x straight from x, which is
what the copy kernel read; the bytes are the same ones, so the readers' values are too.

int8 tensors may be stored as bytes (schedule/narrow.py, decided after this pass): s is
stored as x is (narrow.candidates takes s with x, schedule_kernels drops both together when
either cannot be bytes), and its byte offset is c0 times x's element size then
(`narrow_offsets`, before the arena is planned again).

s stays a tensor of its own when: it or x is a graph input / output, a constant, aliased, a
static loop's slice, already placed in a slice or holding one; the copy is not a plain channel
window (index (n, c + c0, h, w), all of s) of two NHWC tensors of one dtype and value range.
"""
from __future__ import annotations

from ...ir.loopnest import Acc, Bin, Const, Load, Var
from .layout import NHWC


def _channel_window(k):
    """(source buffer, c0) when kernel k copies x[:, c0:c0 + C] to the whole of its output."""
    if k.combine is not None or not isinstance(k.epilogue, Acc) or not isinstance(k.body, Load) \
            or k.loop is not None or any(k.out_offset) or len(k.axes) != 4:
        return None
    ld = k.body
    v = [Var(a.name) for a in k.axes]
    if ld.pad is not None or len(ld.index) != 4 or ld.index[0] != v[0] or tuple(ld.index[2:]) != tuple(v[2:]):
        return None
    c = ld.index[1]
    if c == v[1]:
        return ld.buf, 0
    if isinstance(c, Bin) and c.op == "+" and c.a == v[1] and isinstance(c.b, Const) and c.b.dtype == "int":
        return ld.buf, int(c.b.value)
    return None


def read_slices_in_place(program, layouts):
    """Drop the channel-window copy kernels; returns {s: x's shape} (the storage s's strides
    come from). Updates program.slices, program.strided_slices and notes."""
    g = program.graph
    external = {program.root(t) for t in program.inputs + program.outputs}
    aliased = set(program.aliases) | set(program.aliases.values())
    looped = set(program.loop_slices) | {s.container for s in program.loop_slices.values()}
    writers = {}
    for k in program.kernels:
        writers.setdefault(k.buffers[k.out].tensor, []).append(k)
    slices, containers = dict(program.slices), {c for c, _ in program.slices.values()}
    keep, done = [], {}
    for k in program.kernels:
        win = _channel_window(k)
        if win is None:
            keep.append(k)
            continue
        (src, c0), sb = win, k.buffers[k.out]
        xb = k.buffers[src]
        s, x = sb.tensor, xb.tensor
        ts, tx = g.tensors[s], g.tensors[x]
        shape, xshape = tuple(ts.shape), tuple(tx.shape)
        ok = (s != x and not ({s, x} & (external | aliased | looped)) and ts.data is None and tx.data is None
              and s not in slices and x not in slices and s not in containers and len(writers.get(s, ())) == 1
              and layouts.get(s) == NHWC and layouts.get(x) == NHWC and ts.dtype == tx.dtype
              and g.exact_ints.get(s) == g.exact_ints.get(x) and tuple(sb.shape) == shape
              and tuple(xb.shape) == xshape and len(xshape) == 4 and tuple(a.extent for a in k.axes) == shape
              and all(shape[d] == xshape[d] for d in (0, 2, 3)) and 0 <= c0 and c0 + shape[1] <= xshape[1])
        if not ok:
            keep.append(k)
            continue
        slices[s] = (x, c0 * tx.nbytes // tx.size)      # NHWC: channel c0 of pixel 0
        done[s] = x
        containers.add(x)
        program.notes.append(f"{k.name}: {s} read in place as channels {c0}..{c0 + shape[1] - 1} of NHWC {x}; "
                             "copy dropped")
    program.kernels = keep
    program.slices = slices
    program.strided_slices = frozenset(program.strided_slices) | frozenset(done)
    program.target_state.read_slices = {**program.target_state.read_slices, **done}
    return {s: tuple(g.tensors[x].shape) for s, x in sorted(done.items())}


def partners(bad, read_slices, root):
    """`bad` with each read slice's container and each container's read slices: stored alike."""
    out = set(bad)
    for s, x in read_slices.items():
        if s in out or root(x) in out:
            out |= {s, root(x)}
    return out


def narrow_offsets(program, narrow):
    """Byte offsets of the read slices stored as bytes: c0 elements of one byte each."""
    g = program.graph
    for s, x in program.target_state.read_slices.items():
        if s in narrow:
            c, off = program.slices[s]
            t = g.tensors[x]
            program.slices = {**program.slices, s: (c, off // (t.nbytes // t.size))}
