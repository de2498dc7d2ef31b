"""Cross-layer weight prefetch (option `cross_layer_prefetch`, issue 34): in a launch of
several kernels (stitch.py), the first chunk of the next convolution's first weight block
goes GDRAM -> SRAM while the current kernel computes its last step.

A convolution staging its weights through SRAM in chunks (schedule/conv.py, option
`weight_prefetch`) starts with chunk 0's quarters GDRAM -> SRAM and nothing to overlap them
with: the `__sync_all()` before it joined every queue. Chunk 0 of the next block then goes
GDRAM -> SRAM while chunk j goes SRAM -> WRAM, so once chunk 0 is in SRAM the rest of the
staging costs about the SRAM -> WRAM copies alone. This pass moves that first copy (one per
core, `__memcpy_async` on the IO queue) into the kernel before, right after its last compute
was issued and before the join that waits for it; weights are constants, so nothing the
current kernel writes can change them. The `__sync_all()` between the two kernels completes
the copy on every core before any core reads the chunk (it also is the cluster barrier the
chunk needed). The copy's bytes and direction are unchanged; it is only issued earlier.

The chunk lands in the next kernel's SRAM staging buffer, which is moved clear of the current
kernel's SRAM use and of the launch's intermediates kept in SRAM (residency.py, which runs
before: its buffers are not displaced), first fit (fallback: no prefetch where that passes
the SRAM cncc leaves). A pair is left alone where the next kernel's copy is not the first thing of a
task branch, or a task branch of the current kernel spans task branches of the next whose
copies differ.
"""
from __future__ import annotations

from dataclasses import replace

from ...ir.loopnest import Bin, Load, Var, iconst
from ...ir.sizes import round_up
from .devir import Barrier, For, Stmt, Sync, When, simp, walk
from .traffic import TASKS, Unpredictable, ev

ALIGN = 64


def _branches(nodes, box=((0, 4), (0, 4))):
    """[(box, body)] of the task branches: box ((cluster lo, hi), (core lo, hi)), body the list
    the printer runs for those tasks; None when task loops mix with other nodes or have
    bounds that are not constants (not the shape this pass handles)."""
    loops = [n for n in nodes if isinstance(n, For) and n.task]
    if not loops:
        return [(box, nodes)]
    if len(loops) != len(nodes):
        return None
    out = []
    for n in loops:
        try:
            lo, hi = ev(n.lo, {}), ev(n.hi, {})
        except Unpredictable:
            return None
        i = 0 if n.task == "cluster" else 1
        if n.var != ("tc", "tk")[i]:
            return None
        b = list(box)
        b[i] = (max(box[i][0], lo), min(box[i][1], hi))
        sub = _branches(n.body, tuple(b))
        if sub is None:
            return None
        out += sub
    return out


def _task_branches(body):
    """{task: (box, body list)}, or None (a task in two branches, or another shape)."""
    lv = _branches(body)
    if lv is None:
        return None
    by = {}
    for box, branch in lv:
        for c, k in TASKS:
            if box[0][0] <= c < box[0][1] and box[1][0] <= k < box[1][1]:
                if (c, k) in by:
                    return None
                by[(c, k)] = (box, branch)
    return by


def _first_weight_copy(branch, dk):
    """The first copy of a branch when it is the weight staging's chunk 0: asynchronous
    GDRAM -> SRAM from a weight image, preceded only by copies, fills and barriers."""
    for n in branch:
        if isinstance(n, Stmt) and n.kind == "copy" and n.mapped is not None:
            if n.mapped.direction == "GDRAM2SRAM":
                return n if n.asynchronous and _is_image(dk, n.expr.buf) else None
            continue
        if isinstance(n, Stmt) and n.kind == "fill":
            continue
        if isinstance(n, (Barrier, Sync)):
            continue
        return None
    return None


def _is_image(dk, gbuf):
    return any(name == gbuf and ref[0] == "image" for name, ref in dk.params)


def _last_compute(branch):
    """Index after the last top-level node holding a compute statement (0 when none)."""
    at = 0
    for i, n in enumerate(branch):
        if any(isinstance(s, Stmt) and s.kind == "compute" for s in walk([n])):
            at = i + 1
    return at


def _rename(s, names):
    """A copy of mapped copy `s` with its buffers renamed."""
    m = s.mapped
    ops = {k: (names.get(v[0], v[0]),) + tuple(v[1:]) for k, v in m.ops.items()}
    return replace(s, dst=replace(s.dst, buf=names.get(s.dst.buf, s.dst.buf)),
                   expr=replace(s.expr, buf=names.get(s.expr.buf, s.expr.buf)) if isinstance(s.expr, Load) else s.expr,
                   mapped=replace(m, ops=ops))


def _guarded(s, bbox, box):
    """`s` run by the tasks of b's box only, inside a branch of a's box."""
    conds = []
    for (lo, hi), (alo, ahi), v in zip(bbox, box, ("tc", "tk")):
        if lo > alo:
            conds.append(simp(Bin("-", Var(v), iconst(lo))))
        if hi < ahi:
            conds.append(simp(Bin("-", iconst(hi - 1), Var(v))))
    return When(tuple(conds), [s]) if conds else s


def _sram_range(dk):
    bs = [b for b in dk.bufs.values() if b.space == "SRAM"]
    if not bs:
        return None
    return min(b.offset for b in bs), max(b.offset + b.elems * b.elem_bytes for b in bs)


def _relocate(a, b, sbuf, busy, limit):
    """Move b's SRAM staging buffer clear of a's SRAM use and of the launch's resident
    intermediates (`busy`: [lo, hi) byte ranges), first fit; False where it does not fit."""
    sb = b.bufs[sbuf]
    size = sb.elems * sb.elem_bytes
    if any(x.space == "SRAM" and x.name != sbuf and not x.name.startswith("kept") for x in b.bufs.values()):
        return False        # other SRAM buffers (views, input-stationary blocks): left alone
    taken = sorted(busy + [(x.offset, x.offset + x.elems * x.elem_bytes) for x in a.bufs.values() if x.space == "SRAM"])
    if all(sb.offset >= hi or sb.offset + size <= lo for lo, hi in taken):
        return True
    off = 0
    for lo, hi in taken:
        if off < hi and lo < off + size:
            off = round_up(hi, ALIGN)
    if off + size > limit:
        return False
    b.bufs[sbuf] = replace(sb, offset=off)
    b.info["sram_bytes"] = max(int(b.info.get("sram_bytes", 0)), off + size)
    return True


def _pair(a, b, busy, limit):
    """Move b's chunk-0 weight copies into a; None when done, else why not."""
    if b.cls != "conv":
        return "not a convolution"
    if a.cls in ("scalar", "recurrence"):     # printed from its loop nest: a copy put in its body is lost
        return f"the kernel before is {a.cls} code"
    ta, tb = _task_branches(a.body), _task_branches(b.body)
    if ta is None or tb is None or set(ta) != set(TASKS):
        return "task branches of another shape"
    firsts = {}
    for task, (box, branch) in tb.items():
        firsts[id(branch)] = _first_weight_copy(branch, b)
    # each branch of a: the copies of the b branches its tasks run, guarded by b's box where
    # a's branch spans several
    plan = {}
    for task, (box, branch) in ta.items():
        bbox, bbranch = tb[task] if task in tb else (None, None)
        c = firsts.get(id(bbranch)) if bbranch is not None else None
        if c is not None:
            plan.setdefault(id(branch), (box, branch, {}))[2][id(c)] = (bbox, c)
    copies = [c for c in firsts.values() if c is not None]
    if not copies:
        return "no chunked weight staging first in its task branches"
    if len({c.dst.buf for c in copies}) != 1 or len({c.expr.buf for c in copies}) != 1:
        return "first copies of several buffers"
    if not _relocate(a, b, copies[0].dst.buf, busy, limit):
        return "no SRAM room beside the kernel before"
    sname, gname = copies[0].dst.buf, copies[0].expr.buf
    ref = dict(b.params)[gname]
    mine = {r: n for n, r in a.params}
    if ref not in mine:
        mine[ref] = f"g{len(a.params)}"
        a.params.append((mine[ref], ref))
        a.bufs[mine[ref]] = replace(b.bufs[gname], name=mine[ref])
    local = f"xl_{b.name}_{sname}"
    a.bufs[local] = replace(b.bufs[sname], name=local)
    a.info["sram_bytes"] = max(int(a.info.get("sram_bytes", 0)), int(b.info.get("sram_bytes", 0)))
    names = {sname: local, gname: mine[ref]}
    for box, branch, cs in plan.values():
        at = _last_compute(branch)
        issue = [_guarded(_rename(c, names), bbox, box) for bbox, c in cs.values()]
        branch[at if at else len(branch):at if at else len(branch)] = issue
    for task, (box, branch) in tb.items():
        c = firsts[id(branch)]
        if c is not None and any(n is c for n in branch):
            branch[:] = [n for n in branch if n is not c]
    b.info["weights_prefetched_by"] = a.name
    return None


def prefetch_across(program, sram_limit):
    """Option `cross_layer_prefetch`: per launch of several kernels, each convolution's chunk-0
    weight copies issued by the kernel before it. Returns {kernel: the kernel that issues them, or
    why not}."""
    st = program.target_state
    resident = {}       # launch -> SRAM byte ranges of its intermediates kept there (residency.py)
    for t in (st.on_chip or {}).values():
        resident.setdefault(t["launch"], []).append((t["sram_offset"], t["sram_offset"] + round_up(t["bytes"], ALIGN)))
    by = {dk.name: dk for dk in st.dev}
    done = {}
    for ln in st.launches or ():
        if not ln.stitched:
            continue
        for an, bn in zip(ln.kernels, ln.kernels[1:]):
            why = _pair(by[an], by[bn], resident.get(ln.name, []), sram_limit)
            done[bn] = an if why is None else "not prefetched: " + why
    return done
