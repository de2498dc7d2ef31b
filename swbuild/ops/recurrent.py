"""GRU, LSTM and RNN: one batched GEMM for the input projections of every step, then one
recurrence kernel per direction that runs all the steps (never one kernel per step).

    XW[row(t, b), d*G*H + n] = sum_k X[t, b, k] * W[d, n, k] + bias[d, n]     (one Gemm kernel)
    recurrence (kind "recurrence"): for each step, the gates of every unit from XW, the
    recurrent weights R and h(t-1); writes Y, Y_h, Y_c of its direction

The bias folds W's and R's biases where the equations add both outside any product (every
gate except GRU's h gate with linear_before_reset=1, whose recurrent bias stays inside
r * (h R + Rb)). The recurrence kernel's step math is data here (activations as loop-nest
expressions of Var("x")); each backend prints the step itself (backends/sunway/kinds/recurrence.py,
backends/diannao/recurrence.py) with the cell's C from backends/cell_c.py.
"""
from __future__ import annotations

import numpy as np

from ..support.errors import UnsupportedError
from ..ir.loopnest import Acc, Axis, Bin, Const, Load, Select, Un, Var
from .base import KernelBuilder, const_input, register

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
# activation -> (uses alpha, uses beta, default alpha, default beta), as onnxruntime reads them
ACTIVATIONS = {
    "relu": (False, False, 0.0, 0.0), "tanh": (False, False, 0.0, 0.0), "sigmoid": (False, False, 0.0, 0.0),
    "affine": (True, True, 1.0, 0.0), "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 1.0, 0.0), "scaledtanh": (True, True, 1.0, 1.0),
    "hardsigmoid": (True, True, 0.2, 0.5), "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0), "softplus": (False, False, 0.0, 0.0),
}


def activation_expr(name, alpha, beta):
    """The activation as a loop-nest expression of Var("x")."""
    x = Var("x")
    a, b = Const(alpha), Const(beta)
    zero, one = Const(0.0), Const(1.0)
    return {
        "relu": Un("relu", x), "tanh": Un("tanh", x), "sigmoid": Un("sigmoid", x),
        "affine": Bin("+", Bin("*", a, x), b),
        "leakyrelu": Select(Bin(">=", x, zero), x, Bin("*", a, x)),
        "thresholdedrelu": Select(Bin(">", x, a), x, zero),
        "scaledtanh": Bin("*", a, Un("tanh", Bin("*", b, x))),
        "hardsigmoid": Bin("max", zero, Bin("min", one, Bin("+", Bin("*", a, x), b))),
        "elu": Select(Bin(">=", x, zero), x, Bin("*", a, Bin("-", Un("exp", x), one))),
        "softsign": Bin("/", x, Bin("+", one, Un("abs", x))),
        "softplus": Un("log", Bin("+", one, Un("exp", x))),
    }[name]


def _activations(node, cell, D):
    n = len(DEFAULT_ACTS[cell])
    names = [s.decode() if isinstance(s, bytes) else str(s) for s in node.attrs.get("activations") or []]
    if not names:
        names = DEFAULT_ACTS[cell] * D
    if len(names) != n * D:
        raise UnsupportedError(f"node '{node.name}' ({cell}): {len(names)} activations given, {n * D} expected")
    alphas = list(node.attrs.get("activation_alpha") or [])
    betas = list(node.attrs.get("activation_beta") or [])
    out = []
    for nm in names:
        key = nm.lower()
        if key not in ACTIVATIONS:
            raise UnsupportedError(f"node '{node.name}' ({cell}): activation {nm} is not supported "
                                   f"(supported: {', '.join(sorted(ACTIVATIONS))})")
        ua, ub, da, db = ACTIVATIONS[key]
        alpha = float(alphas.pop(0)) if ua and alphas else da
        beta = float(betas.pop(0)) if ub and betas else db
        out.append(activation_expr(key, alpha, beta))
    return [out[d * n:(d + 1) * n] for d in range(D)]


def _opt(node, k):
    return node.inputs[k] if k < len(node.inputs) and node.inputs[k] else None


def _out(node, k):
    return node.outputs[k] if k < len(node.outputs) and node.outputs[k] else None


@register("RNN", "GRU", "LSTM")
def lower_recurrent(ctx, node):
    cell = node.op
    g = ctx.graph
    G = GATES[cell]
    layout = int(node.attrs.get("layout", 0))
    direction = node.attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("forward", "reverse", "bidirectional"):
        raise UnsupportedError(f"node '{node.name}' ({cell}): direction {direction!r} is not one of forward, reverse, bidirectional")
    D = 2 if direction == "bidirectional" else 1
    x = g.tensors[node.inputs[0]]
    if layout not in (0, 1) or len(x.shape) != 3:
        raise UnsupportedError(f"node '{node.name}' ({cell}): layout {layout} with input shape {list(x.shape)} is not supported")
    T, B, I = (x.shape if layout == 0 else (x.shape[1], x.shape[0], x.shape[2]))
    w_t, r_t = g.tensors[node.inputs[1]], g.tensors[node.inputs[2]]
    H = r_t.shape[-1]
    if tuple(w_t.shape) != (D, G * H, I) or tuple(r_t.shape) != (D, G * H, H):
        raise UnsupportedError(f"node '{node.name}' ({cell}): W {list(w_t.shape)} / R {list(r_t.shape)} do not match "
                               f"{D} direction(s), {G} gates, hidden {H}, input {I}")
    if r_t.data is None:
        raise UnsupportedError(f"node '{node.name}' ({cell}): input 2 ('{r_t.name}', the recurrent weights R) must be a "
                               "constant: they are laid out for the recurrence at compile time")
    lbr = int(node.attrs.get("linear_before_reset", 0)) if cell == "GRU" else 0
    input_forget = int(node.attrs.get("input_forget", 0)) if cell == "LSTM" else 0
    clip = node.attrs.get("clip")
    bias = const_input(ctx, node, 3)
    if bias is not None and _opt(node, 3) and bias.shape != (D, 2 * G * H):
        raise UnsupportedError(f"node '{node.name}' ({cell}): B has shape {list(bias.shape)}, expected {[D, 2 * G * H]}")
    peep = const_input(ctx, node, 7) if cell == "LSTM" else None
    outs = {"y": _out(node, 0), "yh": _out(node, 1), "yc": _out(node, 2) if cell == "LSTM" else None}
    if not any(outs.values()):
        return
    acts = _activations(node, cell, D)

    # one Gemm for every step and both directions: rows in X's own order (t*B+b, or b*T+t)
    M, N = T * B, D * G * H
    xw = ctx.new_temp([M, N], "float32", f"{node.name}:xw")
    kb = KernelBuilder(ctx, node, op="Gemm")
    m, n, kk = Axis("m", M), Axis("n", N), Axis("k", I)
    body = Bin("*", kb.load(x.name, [m.var, kk.var], shape=[M, I]), kb.load(w_t.name, [n.var, kk.var], shape=[N, I]))
    epi = Acc()
    rbh = None
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float32)
        wb, rb = bias[:, :G * H], bias[:, G * H:]
        folded = wb + rb
        if cell == "GRU" and lbr:
            folded[:, 2 * H:] = wb[:, 2 * H:]           # Rb_h stays inside r * (h R + Rb_h)
            rbh = ctx.new_const(np.ascontiguousarray(rb[:, 2 * H:]), f"{node.name}:rbh")
        if np.any(folded):
            epi = Bin("+", Acc(), kb.load(ctx.new_const(folded.reshape(-1), f"{node.name}:bias"), [n.var]))
    ctx.add(kb.kernel(xw, [m, n], body, reduce_axes=(kk,), combine="sum", init=0.0, epilogue=epi))

    lens = _opt(node, 4)
    if lens is not None:
        lt = g.tensors[lens]
        if lt.data is not None and np.all(np.asarray(lt.data) == T):
            lens = None                                  # every sequence is whole
        elif lt.data is not None and (np.any(np.asarray(lt.data) < 0) or np.any(np.asarray(lt.data) > T)):
            raise UnsupportedError(f"node '{node.name}' ({cell}): sequence_lens {np.asarray(lt.data).tolist()} "
                                   f"outside 0..{T}")
        elif lt.dtype != "int32":
            raise UnsupportedError(f"node '{node.name}' ({cell}): sequence_lens has dtype {lt.dtype}, expected int32")
    hx = ctx.new_temp([2, B, H], "float32", f"{node.name}:h")          # h(t-1) exchanged between the cores
    rh = ctx.new_temp([B, H], "float32", f"{node.name}:rh") if cell == "GRU" and not lbr else None
    if peep is not None and _opt(node, 7):
        peep = np.asarray(peep, dtype=np.float32)
        if peep.shape != (D, 3 * H):
            raise UnsupportedError(f"node '{node.name}' (LSTM): P has shape {list(peep.shape)}, expected {[D, 3 * H]}")
    pname = _opt(node, 7) if peep is not None and _opt(node, 7) and np.any(peep) else None   # zero peepholes add nothing
    for d in range(D):
        reverse = direction == "reverse" or d == 1
        kb = KernelBuilder(ctx, node, op=cell)
        roles = {"xw": xw, "r": r_t.name, "hx": hx, "rh": rh, "rbh": rbh, "p": pname,
                 "h0": _opt(node, 5), "c0": _opt(node, 6) if cell == "LSTM" else None, "lens": lens, **outs}
        bufs = {role: kb.buf(t) for role, t in roles.items() if t}
        first = next(bufs[r] for r in ("y", "yh", "yc") if r in bufs)
        k = kb.kernel(kb.buffers[first].tensor, [Axis("t", T), Axis("b", B), Axis("j", H)],
                      Load(bufs["xw"], (Var("t"),)), out_shape=kb.buffers[first].shape)
        k.kind = "recurrence"
        k.extra = {"cell": cell, "T": T, "B": B, "I": I, "H": H, "G": G, "D": D, "d": d, "reverse": reverse,
                   "layout": layout, "lbr": bool(lbr), "input_forget": bool(input_forget),
                   "clip": None if clip is None else float(clip), "acts": acts[d], "bufs": bufs}
        ctx.add(k)
