"""The bytes a DianNao kernel copies, per direction (GDRAM2NRAM, NRAM2GDRAM, ...), predicted
from its final device IR: what the BANG emulator counts for every `__memcpy` /
`__memcpy_async` (size x segments, summed over the 16 tasks), so `swbuild check` can
compare the plan with the counters.

The body is walked as the printed C runs it: once per task (clusterId, coreId), a task loop
being the `if` on the ids the printer writes, loops and guards evaluated with the task's
values, a mapped copy adding (element bytes) x n x segs bytes when both are positive (the printer skips
the rest). A loop whose body does not read its variable counts its body once times the trip
count, and a subtree's count is remembered per values of the variables it reads, so a
kernel of many tiles costs little to walk.

Scalar-class kernels copy nothing (they load and store GDRAM directly, which neither the
emulator's copy counters nor this prediction see); recurrence kernels, printed outside the
device IR, count their own (recurrence.copy_bytes). Not predicted (the plan says why):
bounds that read data at run time.
"""
from __future__ import annotations

from ...ir.loopnest import Bin, Const, Var
from .devir import Barrier, For, ScalarLoad, Stmt, Sync, When, free_vars
from .recurrence import copy_bytes as recurrence_copy_bytes

TASKS = [(c, k) for c in range(4) for k in range(4)]     # Union1 launch: 4 clusters x 4 cores
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        "//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": min, "max": max}


class Unpredictable(Exception):
    """The kernel's copies depend on something only the run knows."""


def ev(e, env):
    """Integer value of an index expression (floor division and modulo, as SW_FLOORDIV / SW_MOD)."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        if e.name not in env:
            raise Unpredictable(f"a copy's size or a loop bound reads {e.name}, known only at run time")
        return env[e.name]
    if isinstance(e, Bin) and e.op in _OPS:
        return _OPS[e.op](ev(e.a, env), ev(e.b, env))
    raise Unpredictable(f"a copy's size or a loop bound is not an integer expression ({type(e).__name__})")


def _vars(e):
    return set() if isinstance(e, int) else free_vars(e)


class Walker:
    def __init__(self, bufs=None):
        self.fv = {}
        self.memo = {}
        self.bufs = bufs or {}

    # -- which variables a subtree reads (its count depends on nothing else) ------------
    def free(self, n):
        key = id(n)
        if key not in self.fv:
            self.fv[key] = self._free(n)
        return self.fv[key]

    def _free(self, n):
        if isinstance(n, list):
            return set().union(*(self.free(c) for c in n)) if n else set()
        if isinstance(n, For):
            inner = self.free(n.body)
            if n.task:
                return inner | {n.var}
            return _vars(n.lo) | _vars(n.hi) | (inner - {n.var})
        if isinstance(n, When):
            return set().union(*(_vars(c) for c in n.conds)) | self.free(n.body)
        if isinstance(n, Stmt) and _is_copy(n):
            m = n.mapped
            out = set().union(*(_vars(v) for v in m.params.values()))
            for lp in reversed(m.outer):
                out = (out - {lp.var}) | _vars(lp.lo) | _vars(lp.ext)
            return out
        return set()

    # -- counting ----------------------------------------------------------------------
    def count(self, nodes, env):
        fv = self.free(nodes)
        key = (id(nodes), tuple(sorted((v, env[v]) for v in fv if v in env)))
        if key not in self.memo:
            out = {}
            for n in nodes:
                _add(out, self.node(n, env))
            self.memo[key] = out
        return self.memo[key]

    def node(self, n, env):
        if isinstance(n, For) and n.task:
            return self.count(n.body, env) if ev(n.lo, env) <= env[n.var] < ev(n.hi, env) else {}
        if isinstance(n, For):
            lo, hi = ev(n.lo, env), ev(n.hi, env)
            if hi <= lo:
                return {}
            if n.var not in self.free(n.body):
                return _times(self.count(n.body, env), hi - lo)
            out = {}
            for i in range(lo, hi):
                _add(out, self.count(n.body, dict(env, **{n.var: i})))
            return out
        if isinstance(n, When):
            return self.count(n.body, env) if all(ev(c, env) >= 0 for c in n.conds) else {}
        if isinstance(n, Stmt):
            return self.copy(n, env) if _is_copy(n) else {}
        if isinstance(n, (ScalarLoad, Barrier, Sync)):
            return {}
        raise Unpredictable(f"device IR node {type(n).__name__} is not known to the copy predictor")

    def copy(self, s, env):
        m = s.mapped
        return self._outer(m, list(m.outer), env)

    def _outer(self, m, loops, env):
        if not loops:
            n = ev(m.params.get("n", 1), env)
            segs = ev(m.params.get("segs", 1), env)
            b = self.bufs.get(m.ops["dst"][0])       # int8 tensors are copied as bytes (schedule/narrow.py)
            eb = b.elem_bytes if b is not None else 4
            return {m.direction: eb * n * segs} if n > 0 and segs > 0 else {}
        lp, rest = loops[0], loops[1:]
        lo, ext = ev(lp.lo, env), ev(lp.ext, env)
        out = {}
        for i in range(lo, lo + max(0, ext)):
            _add(out, self._outer(m, rest, dict(env, **{lp.var: i})))
        return out


def _is_copy(s):
    return s.mapped is not None and s.mapped.desc.kind == "copy"


def _add(into, d):
    for k, v in d.items():
        into[k] = into.get(k, 0) + v


def _times(d, n):
    return {k: v * n for k, v in d.items()}


def predicted_copy_bytes(dk):
    """({direction: bytes} over one launch of the kernel, None) or (None, why not)."""
    if dk.cls == "scalar":      # its printer (printer.scalar_kernel) emits no copy at all
        return {}, None
    if dk.cls == "recurrence":      # printed by recurrence.py, outside the device IR: it counts its own
        return recurrence_copy_bytes(dk), None
    w = Walker(dk.bufs)
    out = {}
    try:
        for c, k in TASKS:
            _add(out, w.count(dk.body, {"tc": c, "tk": k}))
    except Unpredictable as e:
        return None, str(e)
    return {d: v for d, v in sorted(out.items()) if v}, None
