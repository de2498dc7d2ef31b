"""Load / compute / store over ping and pong buffers (the mlu-ops three-stage pipeline).

A tile loop whose body is mapped statements — loads (GDRAM → NRAM/WRAM copies), compute,
stores (NRAM → GDRAM copies) — is rewritten so that while tile i is computed, tile i+1 is
loaded and tile i-1 stored with `__memcpy_async`, each on-chip buffer a load writes or a
store reads having two halves chosen by the tile's parity:

    prologue   F(lo) F(lo+1) sync_compute L(lo)
    step i     sync_all | S(i-1) if i > lo | C(i) | F(i+2) if i+2 < hi | sync_io | L(i+1) if i+1 < hi
    epilogue   sync_all S(hi-1) sync_all

F are the fills that prepare a load's buffer (halo, padding): compute-queue work two tiles
ahead, so the load after the next step's join never waits for this step's compute. The
__sync_io before L(i+1) lets the store of tile i-1 finish reading a buffer the load is about
to overwrite (in-place element-wise kernels); the IO queue runs them in order anyway, so it
costs nothing. A step costs max(compute, load + store) in the emulator (bangemu: queues
overlap until a sync), the loop prologue + per-step maxima + epilogue.

What is not rewritten stays serial: bodies with barriers, nested loops, run-time guards,
scalar statements or on-chip copies through SRAM, and loops whose doubled buffers would
not fit the on-chip budgets.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Bin, Var, iconst
from ...ir.sizes import round_up
from .devir import For, ScalarLoad, SLoop, Stmt, Sync, When, const, free_vars, simp, subst
ALIGN = 64   # on-chip offsets, as schedule.builder.ALIGN

ON_CHIP = ("NRAM", "WRAM")


def pipeline_kernel(dk, target):
    """Rewrite every eligible tile loop of dk; returns how many were rewritten."""
    budget = {"NRAM": target.nram_budget, "WRAM": target.wram_budget}
    state = {"n": 0, "pong": {}}
    dk.body = _walk(dk.body, dk, budget, state)
    dk.info["pipelined_loops"] = state["n"]
    return state["n"]


def _walk(nodes, dk, budget, state):
    out = []
    for n in nodes:
        if isinstance(n, For) and not n.task:
            plan = _plan(n, dk, budget, state)
            if plan is not None:
                out += _rewrite(n, plan, dk, state)
                state["n"] += 1
                continue
            n.body = _walk(n.body, dk, budget, state)
        elif isinstance(n, (For, When)):
            n.body = _walk(n.body, dk, budget, state)
        out.append(n)
    return out


def _src_buf(s):
    return s.mapped.ops["src"][0] if s.mapped and "src" in s.mapped.ops else None


def _bufs(s):
    """(buffers read, buffers written) by a mapped statement."""
    w = {s.mapped.ops["dst"][0]} if "dst" in s.mapped.ops else set()
    r = {v[0] for k, v in s.mapped.ops.items() if k != "dst"}
    if s.combine or s.dst.buf in r:
        r.add(s.dst.buf)
    return r, w


def _plan(loop, dk, budget, state):
    """Stages of an eligible loop: {"F": [...], "L": [...], "C": [...], "S": [...], "double": [...]}."""
    lo, hi = const(loop.lo), const(loop.hi)
    if lo is None or hi is None or hi - lo < 2:
        return None
    body = loop.body
    if not all(isinstance(n, ScalarLoad) or (isinstance(n, Stmt) and n.mapped is not None) for n in body):
        return None
    space = lambda b: dk.bufs[b].space   # noqa: E731
    stages = {"F": [], "L": [], "C": [], "S": []}
    touched = set()          # buffers compute or stores used so far
    loaded = set()
    later = [set() for _ in body]    # buffers loaded at or after each position
    for j in range(len(body) - 1, -1, -1):
        n = body[j]
        later[j] = set(later[j + 1]) if j + 1 < len(body) else set()
        if isinstance(n, Stmt) and n.kind == "copy" and space(n.dst.buf) in ON_CHIP and space(_src_buf(n)) == "GDRAM":
            later[j].add(n.dst.buf)
    for j, n in enumerate(body):
        if isinstance(n, ScalarLoad):
            stages["C"].append(n)
            continue
        r, w = _bufs(n)
        d = n.dst.buf
        if n.kind == "copy":
            src = _src_buf(n)
            if space(d) in ON_CHIP and space(src) == "GDRAM":
                if d in touched:
                    return None   # a buffer reloaded after use: not one tile's input
                stages["L"].append(n)
                loaded.add(d)
                continue
            if space(d) == "GDRAM" and space(src) == "NRAM":
                stages["S"].append(n)
                touched.add(src)
                continue
            if "SRAM" in (space(d), space(src)) or "GDRAM" in (space(d), space(src)):
                return None
        if n.kind == "fill" and d in later[j] and d not in touched and d not in loaded \
                and not any(free_vars(e) for e in n.mapped.scalars.values()):
            stages["F"].append(n)
            continue
        if (r | w) & {_src_buf(s) for s in stages["S"]}:
            return None   # a stored buffer used again after its store
        stages["C"].append(n)
        touched |= r | w
    if not stages["L"] or not stages["C"]:
        return None
    filled = {s.dst.buf for s in stages["F"]}
    stored = {_src_buf(s) for s in stages["S"]}
    if filled & stored:
        return None      # F(i+2) would overwrite what S(i) has not stored yet
    double = sorted(loaded | stored)
    top = {sp: dk.info[f"{sp.lower()}_bytes"] for sp in ON_CHIP}
    pong = {}
    for b in double:
        sp = space(b)
        if b in state["pong"]:
            pong[b] = state["pong"][b]
            continue
        off = round_up(top[sp], ALIGN)
        top[sp] = off + round_up(dk.bufs[b].elems * 4, ALIGN)
        pong[b] = off
    if any(top[sp] > budget[sp] for sp in ON_CHIP):
        return None
    for sp in ON_CHIP:
        dk.info[f"{sp.lower()}_bytes"] = top[sp]
    state["pong"].update(pong)
    stages["delta"] = {b: (pong[b] - dk.bufs[b].offset) // 4 for b in double}
    return stages


def _subst_mapped(m, env, delta, parity):
    def e(x):
        return simp(subst(x, env)) if not isinstance(x, int) else x
    ops = {}
    for k, v in m.ops.items():
        off = e(v[1])
        if v[0] in delta:
            off = simp(Bin("+", off, Bin("*", parity, iconst(delta[v[0]]))))
        ops[k] = (v[0], off) + tuple(e(x) for x in v[2:])
    return replace(m, params={k: e(v) for k, v in m.params.items()}, ops=ops,
                   scalars={k: e(v) for k, v in m.scalars.items()},
                   outer=[SLoop(lp.var, e(lp.lo), e(lp.ext)) for lp in m.outer])


def _at(stmts, var, shift, delta, asynchronous=False):
    """The statements of tile var + shift: loop variable substituted, doubled buffers at
    their half of that parity."""
    at = simp(Bin("+", Var(var), iconst(shift)))
    parity = simp(Bin("%", at, iconst(2)))
    env = {var: at}
    out = []
    for s in stmts:
        if isinstance(s, ScalarLoad):
            out.append(s)
            continue
        out.append(replace(s, mapped=_subst_mapped(s.mapped, env, delta, parity), asynchronous=asynchronous))
    return out


def _rewrite(loop, st, dk, state):
    v, lo, hi = loop.var, const(loop.lo), const(loop.hi)
    d = st["delta"]

    def fixed(stmts, i, asynchronous=False):
        return [replace(s, mapped=_subst_mapped(s.mapped, {v: iconst(i)}, d, iconst(i % 2)),
                        asynchronous=asynchronous) for s in stmts]

    def when(cond, body):
        return [When((simp(cond),), body)] if body else []

    pro = fixed(st["F"], lo) + fixed(st["F"], lo + 1)
    pro += [Sync("compute")] + fixed(st["L"], lo, True)   # compute before the loop may use the buffers
    step = [Sync("all")]
    step += when(Bin("-", Var(v), iconst(lo + 1)), _at(st["S"], v, -1, d, True))
    step += _at(st["C"], v, 0, d)
    step += when(Bin("-", iconst(hi - 3), Var(v)), _at(st["F"], v, 2, d))
    step += [Sync("io")] + when(Bin("-", iconst(hi - 2), Var(v)), _at(st["L"], v, 1, d, True))
    epi = [Sync("all")] + fixed(st["S"], hi - 1, True) + [Sync("all")]
    return pro + [For(v, loop.lo, loop.hi, step)] + epi


def pipelined_cycles(steps, load, compute, store, pipelined=True):
    """Cycles of `steps` tiles of one core: serialised, the sum; pipelined, what the rewrite
    above costs in the emulator: prologue (load 0), per-step maximum of the compute queue
    and the IO queue (load i+1 + store i-1), epilogue (the last store)."""
    if not pipelined or steps < 2:
        return steps * (load + compute + store)
    return (load + max(load, compute) + (steps - 2) * max(load + store, compute)
            + max(store, compute) + store)
