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

Straight-line tiles (partitioning peels a task's first and last tiles and substitutes
one-iteration loops; a tile loop of at most UNROLL_MAX iterations next to such tiles is
unrolled into them) get the same schedule with the halves fixed per tile: a chunk of
statements ending with its stores is a tile; what precedes the first tile's loads that is
not one (weights through SRAM, barriers, per-channel operands the later tiles read) stays
a serial prefix, and no doubled buffer may carry a value from one tile to the next.

What is not rewritten stays serial: bodies with barriers, nested loops, run-time guards,
scalar statements or on-chip copies through SRAM, and runs whose doubled buffers would
not fit the on-chip budgets.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Bin, Load, Var, children, iconst
from ...ir.sizes import round_up
from .devir import For, ScalarLoad, SLoop, Stmt, Sync, When, const, free_vars, simp, subst

ALIGN = 64   # on-chip offsets, as schedule.builder.ALIGN (which imports this module)
ON_CHIP = ("NRAM", "WRAM")
# a load is a copy into NRAM/WRAM from GDRAM (IO queue) or from SRAM (move queue: weights a
# cluster holds, schedule/conv.py's input-stationary order); the step's join waits for both
LOAD_FROM = ("GDRAM", "SRAM")
UNROLL_MAX = 8   # a tile loop this short next to peeled tiles joins them as straight-line tiles


def pipeline_kernel(dk, target):
    """Rewrite every eligible run of tiles of dk; returns how many were rewritten."""
    budget = {"NRAM": target.nram_budget, "WRAM": target.wram_budget}
    state = {"n": 0, "pong": {}, "budget": budget}
    dk.body = _walk(dk.body, dk, state)
    dk.info["pipelined_loops"] = state["n"]
    return state["n"]


def _flat(nodes):
    """Statements of a body with its unconditional scopes opened (partitioning wraps peeled
    tiles that declare scalars in one), or None when other nodes are in it."""
    out = []
    for n in nodes:
        if isinstance(n, When) and not n.conds:
            inner = _flat(n.body)
            if inner is None:
                return None
            out += inner
        elif isinstance(n, ScalarLoad) or (isinstance(n, Stmt) and n.mapped is not None):
            out.append(n)
        else:
            return None
    return out


def _is_store(n, dk):
    return isinstance(n, Stmt) and n.mapped is not None and n.kind == "copy" and dk.bufs[n.dst.buf].space == "GDRAM" \
        and dk.bufs[_src_buf(n)].space == "NRAM"


def _unroll(loop, dk):
    lo, hi = const(loop.lo), const(loop.hi)
    out = []
    for i in range(lo, hi):
        env = {loop.var: iconst(i)}
        for n in _flat(loop.body):
            if isinstance(n, ScalarLoad):
                out.append(ScalarLoad(n.name, simp(subst(n.src, env)), tuple(simp(subst(c, env)) for c in n.guard)))
            else:
                out.append(replace(n, mapped=_subst_mapped(n.mapped, env, {}, iconst(0))))
    return out


def _walk(nodes, dk, state):
    # 1. children first; tile loops stay loops (rewritten later) or, when short and next to
    #    straight-line tiles, are unrolled into them
    items = []
    for n in nodes:
        if isinstance(n, For) and not n.task:
            tile = _flat(n.body)
            if tile is not None and _stages(tile, dk) is not None and const(n.lo) is not None \
                    and const(n.hi) is not None:
                items.append(("loop", n))
                continue
            n.body = _walk(n.body, dk, state)
        elif isinstance(n, For) or (isinstance(n, When) and n.conds):
            n.body = _walk(n.body, dk, state)
        elif isinstance(n, When):
            flat = _flat(n.body)
            if flat is not None:
                items += [("stmt", x) for x in flat]
                continue
            n.body = _walk(n.body, dk, state)
        items.append(("stmt", n) if isinstance(n, (Stmt, ScalarLoad)) else ("other", n))
    for j, (kind, n) in enumerate(items):
        if kind == "loop" and const(n.hi) - const(n.lo) <= UNROLL_MAX and \
                any(0 <= j + d < len(items) and items[j + d][0] == "stmt" for d in (-1, 1)):
            items[j] = ("tiles", _unroll(n, dk))
    # 2. chunks of straight-line statements, each ending after its stores
    seq, out = [], []
    for kind, n in items:
        if kind == "stmt":
            seq.append(n)
        elif kind == "tiles":
            seq += n
        else:
            out += _pipeline_straight(seq, dk, state)
            seq = []
            if kind == "loop":
                out += _pipeline_loop(n, dk, state)
            else:
                out.append(n)
    return out + _pipeline_straight(seq, dk, state)


def _chunks(seq, dk):
    chunks, cur = [], []
    for j, n in enumerate(seq):
        cur.append(n)
        if _is_store(n, dk) and not (j + 1 < len(seq) and _is_store(seq[j + 1], dk)):
            chunks.append(cur)
            cur = []
    return chunks, cur


def _pipeline_straight(seq, dk, state):
    """Consecutive tiles of straight-line code (peeled by partitioning, or unrolled)."""
    if not seq:
        return []
    chunks, rest = _chunks(seq, dk)
    out, run = [], []

    def flush():
        nonlocal run
        if len(run) >= 2:
            emitted = _static(run, dk, state)
            if emitted is not None:
                out.extend(emitted)
                state["n"] += 1
                run = []
                return
        for _, st in run:
            out.extend(_scope(st["body"]))
        run = []

    for j, ch in enumerate(chunks):
        if run:
            st = _stages(ch, dk)
            carried = set().union(*(x["loaded"] | x["stored"] for _, x in run))
            if st is not None and not (_exposed(ch, dk) & (st["loaded"] | carried)):
                run.append((ch, st))
                continue
        flush()
        # a serial prefix (weights, barriers, per-channel operands the next tiles read) then
        # the tile that starts a run
        nxt = _exposed(chunks[j + 1], dk) if j + 1 < len(chunks) else set()
        for p in range(len(ch)):
            st = _stages(ch[p:], dk)
            if st is not None and not (st["loaded"] & nxt):
                out.extend(_scope(ch[:p]))
                run.append((ch[p:], st))
                break
        else:
            out.extend(_scope(ch))
    flush()
    return out + _scope(rest)


def _exposed(body, dk):
    """On-chip buffers a body reads before it writes them: values from before the tile."""
    seen, exp = set(), set()
    for n in body:
        if isinstance(n, ScalarLoad):
            continue
        r, w = _bufs(n)
        exp |= {b for b in r if b not in seen and dk.bufs[b].space in ON_CHIP}
        seen |= w
    return exp


def _scope(stmts):
    """Statements declaring scalars keep their own C scope."""
    return [When((), stmts)] if any(isinstance(n, ScalarLoad) for n in stmts) else list(stmts)


def _src_buf(s):
    return s.mapped.ops["src"][0] if s.mapped and "src" in s.mapped.ops else None


def _loads(e, out):
    if isinstance(e, Load):
        out.add(e.buf)
    for c in children(e):
        _loads(c, out)
    return out


def _bufs(s):
    """(buffers read, buffers written) by a statement."""
    if s.mapped is None:     # scalar code: the loads of its expression
        return _loads(s.expr, set()), {s.dst.buf}
    w = {s.mapped.ops["dst"][0]} if "dst" in s.mapped.ops else set()
    r = {v[0] for k, v in s.mapped.ops.items() if k != "dst"}
    return r, w   # a reduction (conv, pool) writes its dst: it does not accumulate into it


def _stages(body, dk):
    """A tile's statements by stage: {"F", "L", "C", "S"} (fills preparing a load's buffer,
    loads, compute, stores), or None when the body is not one tile."""
    space = lambda b: dk.bufs[b].space   # noqa: E731
    stages = {"F": [], "L": [], "C": [], "S": [], "body": body}
    touched, loaded = set(), set()         # buffers compute or stores used so far; loaded so far
    later = [set() for _ in body]          # buffers loaded at or after each position
    for j in range(len(body) - 1, -1, -1):
        n = body[j]
        later[j] = set(later[j + 1]) if j + 1 < len(body) else set()
        if isinstance(n, Stmt) and n.mapped is not None and n.kind == "copy" and space(n.dst.buf) in ON_CHIP \
                and space(_src_buf(n)) in LOAD_FROM:
            later[j].add(n.dst.buf)
    for j, n in enumerate(body):
        if isinstance(n, ScalarLoad):
            stages["C"].append(n)
            continue
        if n.mapped is None:
            return None   # scalar code stays where it is
        r, w = _bufs(n)
        d = n.dst.buf
        if n.kind == "copy":
            src = _src_buf(n)
            if space(d) in ON_CHIP and space(src) in LOAD_FROM:
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
    if not stages["L"] or not any(isinstance(n, Stmt) for n in stages["C"]):
        return None
    stages["loaded"], stages["stored"] = loaded, {_src_buf(s) for s in stages["S"]}
    stages["filled"] = {s.dst.buf for s in stages["F"]}
    return stages


def _double(dk, state, loaded, stored, filled):
    """Pong halves of the buffers loads write and stores read ({buffer: element delta}),
    or None when they do not fit."""
    if filled & stored:
        return None      # F(i+2) would overwrite what S(i) has not stored yet
    double = sorted(loaded | stored)
    top = {sp: dk.info[f"{sp.lower()}_bytes"] for sp in ON_CHIP}
    pong = {}
    for b in double:
        sp = dk.bufs[b].space
        if b in state["pong"]:
            pong[b] = state["pong"][b]
            continue
        off = round_up(top[sp], ALIGN)
        top[sp] = off + round_up(dk.bufs[b].elems * dk.bufs[b].elem_bytes, ALIGN)
        pong[b] = off
    if any(top[sp] > state["budget"][sp] for sp in ON_CHIP):
        return None
    for sp in ON_CHIP:
        dk.info[f"{sp.lower()}_bytes"] = top[sp]
    state["pong"].update(pong)
    return {b: (pong[b] - dk.bufs[b].offset) // dk.bufs[b].elem_bytes for b in double}


def _static(run, dk, state):
    """Tiles 0..n-1 of straight-line code: the pipeline with each tile's halves fixed."""
    union = lambda k: set().union(*(st[k] for _, st in run))   # noqa: E731
    if any(_exposed(ch, dk) & (union("loaded") | union("stored")) for ch, _ in run):
        return None      # a doubled buffer would carry a value from one tile to the next
    d = _double(dk, state, union("loaded"), union("stored"), union("filled"))
    if d is None:
        return None
    n = len(run)

    def at(i, k, asynchronous=False):
        return [x if isinstance(x, ScalarLoad) else
                replace(x, mapped=_subst_mapped(x.mapped, {}, d, iconst(i % 2)), asynchronous=asynchronous)
                for x in run[i][1][k]]

    out = at(0, "F") + (at(1, "F") if n > 1 else []) + [Sync("compute")] + at(0, "L", True)
    for i in range(n):
        out += [Sync("all")] + (at(i - 1, "S", True) if i else []) + _scope(at(i, "C"))
        out += (at(i + 2, "F") if i + 2 < n else []) + [Sync("io")] + (at(i + 1, "L", True) if i + 1 < n else [])
    return out + [Sync("all")] + at(n - 1, "S", True) + [Sync("all")]


def _pipeline_loop(loop, dk, state):
    lo, hi = const(loop.lo), const(loop.hi)
    body = _flat(loop.body)
    st = _stages(body, dk)
    if hi - lo < 2 or _exposed(body, dk) & (st["loaded"] | st["stored"]):
        return [loop]     # one tile, or a value carried from one iteration to the next
    d = _double(dk, state, st["loaded"], st["stored"], st["filled"])
    if d is None:
        return [loop]
    st["delta"] = d
    state["n"] += 1
    return _rewrite(loop, st, dk, state)


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
