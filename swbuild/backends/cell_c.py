"""The C of one recurrent cell's unit update (GRU, LSTM, RNN), shared by the Sunway and
DianNao recurrence printers: the equations of the ONNX operators, written once.

A printer passes C accessors (strings, or functions of the gate index q):
    xw(q)  input projection of gate q, bias folded in (ops/recurrent.py)
    hr(q)  the recurrent product of gate q (GRU with linear_before_reset=0: of r * h for q = 2)
    hp     h(t-1) of the unit;  cp  c(t-1) (LSTM);  pp(q) peephole (LSTM, or None)
    rbh    GRU h gate's recurrent bias (linear_before_reset=1, or None)
    z, r   lvalues that keep GRU's gates between its two phases
and gets statements that set `hn` (and `cn`), declared by the printer. Gate order is the
operators': GRU z r h, LSTM i o f c (peepholes i o f).
"""
from __future__ import annotations

from . import cexpr


def flops(ex):
    """Arithmetic of a recurrence kernel over its T steps (a multiply-add counts 2): the
    recurrent GEMVs plus about ten operations per unit for the cell update."""
    T, B, H, G = ex["T"], ex["B"], ex["H"], ex["G"]
    return 2 * T * B * G * H * H + 10 * T * B * H


def scratch(ex, roles, B, NJ):
    """The cell's own local buffers (elements, in allocation order) for NJ units of B rows,
    after the printer's projection and state buffers: c state, GRU gates, peepholes, the h
    gate's bias, sequence lengths and the zero row of padded outputs."""
    out = {}
    if ex["cell"] == "LSTM":
        out["cs"] = B * NJ
    if ex["cell"] == "GRU":
        out["zr"] = 2 * B * NJ
        if not ex["lbr"]:
            out["rhb"] = B * NJ
    if "p" in roles:
        out["pp"] = 3 * NJ
    if "rbh" in roles:
        out["rb"] = NJ
    if "lens" in roles:
        out["ln"] = B
        if "y" in roles:
            out["zero"] = NJ
    return out


def masked_update(ex, xw, hr, zr, NJ, peepholes, h_bias):
    """The C of unit i = (row b, unit u) inside a printer's loop: the cell update where the
    row's sequence is still active (act[b]), else h (and c) keep their values; the result in
    hn[i] (and cs[i]). `peepholes`, `h_bias`: the printer holds pp / rb buffers."""
    lstm = ex["cell"] == "LSTM"
    L = ["float hn_ = hp[i];"] + (["float cn_ = cs[i];"] if lstm else []) + [
         "if (act[b]) {", "  float hn, cn;", "  (void)cn;"]
    if ex["cell"] == "GRU" and ex["lbr"]:
        L += ["  " + s for s in gru_gates(ex, xw, hr, *zr)]
    L += ["  " + s for s in unit_update(ex, xw, hr, "hp[i]", cp="cs[i]" if lstm else None,
                                        pp=(lambda q: f"pp[{q * NJ} + u]") if peepholes else None,
                                        rbh="rb[u]" if h_bias else None, z=zr[0], r=zr[1])]
    L += ["  hn_ = hn;"] + (["  cn_ = cn;"] if lstm else []) + ["}", "hn[i] = hn_;"] + (["cs[i] = cn_;"] if lstm else [])
    return L


def _act(e, x):
    """C text of an activation (an expression of Var("x")) applied to C text `x`."""
    return cexpr.render(e, lambda n: f"({x})" if n == "x" else n, None)


def _clip(ex, s):
    c = ex["clip"]
    return s if c is None else f"sw_fminf(sw_fmaxf({s}, {cexpr.float_literal(-c)}), {cexpr.float_literal(c)})"


def gru_gates(ex, xw, hr, z, r):
    """GRU's z and r (the first phase when linear_before_reset=0)."""
    f = ex["acts"][0]
    return [f"{z} = {_act(f, _clip(ex, f'{xw(0)} + {hr(0)}'))};",
            f"{r} = {_act(f, _clip(ex, f'{xw(1)} + {hr(1)}'))};"]


def unit_update(ex, xw, hr, hp, cp=None, pp=None, rbh=None, z="sw_z", r="sw_r"):
    """Statements computing hn (and cn) of one unit. For GRU, z and r must already hold the
    gates (gru_gates)."""
    cell, acts = ex["cell"], ex["acts"]
    if cell == "RNN":
        return [f"hn = {_act(acts[0], _clip(ex, f'{xw(0)} + {hr(0)}'))};"]
    if cell == "GRU":
        g = acts[1]
        inner = f"{xw(2)} + {r} * ({hr(2)} + {rbh})" if ex["lbr"] and rbh else \
            f"{xw(2)} + {r} * {hr(2)}" if ex["lbr"] else f"{xw(2)} + {hr(2)}"
        return [f"{{ const float sw_h = {_act(g, _clip(ex, inner))};",
                f"  hn = (1.0f - {z}) * sw_h + {z} * ({hp}); }}"]
    f, g, h = acts

    def peep(q, c):
        return f" + {pp(q)} * ({c})" if pp else ""
    i_ = _act(f, _clip(ex, f"{xw(0)} + {hr(0)}{peep(0, cp)}"))
    f_ = "(1.0f - sw_i)" if ex["input_forget"] else _act(f, _clip(ex, f"{xw(2)} + {hr(2)}{peep(2, cp)}"))
    c_ = _act(g, _clip(ex, f"{xw(3)} + {hr(3)}"))
    o_ = _act(f, _clip(ex, f"{xw(1)} + {hr(1)}{peep(1, 'cn')}"))
    return [f"{{ const float sw_i = {i_};", f"  const float sw_f = {f_};",
            f"  cn = sw_f * ({cp}) + sw_i * {c_};", f"  hn = {o_} * {_act(h, 'cn')}; }}"]
