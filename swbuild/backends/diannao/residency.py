"""Buffer stitching on chip (option `sram_residency`, issue 34): inside one grouped launch
(stitch.py), an intermediate tensor written by one kernel and read only by later kernels of
the SAME launch stays in the SRAM of the cluster that wrote it instead of going through
GDRAM: the producer's stores become NRAM2SRAM, the consumers' loads SRAM2NRAM.

SRAM is per cluster, so this is only right where every cluster reads back what its own
cores wrote. That is checked on the final device IR, not assumed from the schedule: per
cluster, the element range of the tensor its tasks write (hull over the cores) and read are
evaluated with each task's ids (as traffic.py walks the copies); the write ranges of the
clusters must be disjoint, each cluster's reads inside its own write range, and the range
starts linear in the cluster id (base + clusterId x Q), so that element e of cluster c lies
at e - base - c x Q of its SRAM buffer. Rows split the same way over the clusters by the
producer and a consumer that reads no halo (a 1x1 convolution, an element-wise kernel)
pass; a 3x3 convolution reading its neighbour cluster's rows, or clusters mode (each
cluster a channel slice, every cluster reading all of them) do not, and stay in GDRAM.

The `__sync_all()` stitch.py puts between the kernels of a launch orders the producer's
SRAM writes (and completes its asynchronous copies) before the consumers read. The SRAM
buffers of a launch sit above the largest SRAM use of its kernels (weight staging), placed
first-fit over their live ranges (producer .. last consumer, in launch order); a tensor that
does not fit in the SRAM cncc leaves (sram_bytes - sram_reserve_bytes) stays in GDRAM.
A tensor any other launch, a scalar-class kernel or a non-copy access touches stays in GDRAM.
"""
from __future__ import annotations

from ...ir.loopnest import Bin, Var, data_loads, iconst
from ...ir.sizes import round_up
from ..launches import alone
from .devir import DBuf, For, ScalarLoad, Stmt, Sync, When, simp, walk
from .traffic import TASKS, Unpredictable, ev

ALIGN = 64     # SRAM buffer starts, as the schedule aligns its own


def gdram_copies(dk, gbuf):
    """The mapped copies of the kernel that read (GDRAM2*) or write (*2GDRAM) GDRAM buffer
    `gbuf`; None when something else touches it (a scalar load, an unmapped or non-copy
    statement), which residency cannot rewrite."""
    if dk.cls in ("scalar", "recurrence"):     # printed from the loop nest, reading GDRAM directly
        return None
    out = []
    for n in walk(dk.body):
        if isinstance(n, ScalarLoad) and n.src.buf == gbuf:
            return None
        if not isinstance(n, Stmt):
            continue
        m = n.mapped
        if m is None:
            if gbuf in _bufs_of(n):
                return None
            continue
        if any(op[0] == gbuf for op in m.ops.values()):
            if m.desc.kind != "copy" or not (m.direction.startswith("GDRAM2") or m.direction.endswith("2GDRAM")):
                return None
            out.append(n)
    return out


def _bufs_of(s):
    return {s.dst.buf} | {ld.buf for ld in data_loads(s.expr)}


def copy_ranges(dk, targets):
    """{(cluster, 'r'|'w'): [lo, hi)} element ranges of the copies in `targets` (Stmt ids),
    over every task of the launch."""
    out = {}

    def put(key, lo, hi):
        a = out.get(key)
        out[key] = (lo, hi) if a is None else (min(a[0], lo), max(a[1], hi))

    def copy(s, env, c):
        m = s.mapped
        side = "dst" if m.direction.endswith("2GDRAM") else "src"

        def rec(loops, env):
            if loops:
                lp = loops[0]
                lo, ext = ev(lp.lo, env), ev(lp.ext, env)
                for i in range(lo, lo + max(0, ext)):
                    rec(loops[1:], dict(env, **{lp.var: i}))
                return
            n, segs = ev(m.params.get("n", 1), env), ev(m.params.get("segs", 1), env)
            if n <= 0 or segs <= 0:
                return
            stride = ev(m.params.get("ds" if side == "dst" else "ss", 0), env) if "segs" in m.params else 0
            off = ev(m.ops[side][1], env)
            put((c, "w" if side == "dst" else "r"), off, off + (segs - 1) * stride + n)
        rec(list(m.outer), env)

    def nodes(ns, env, c):
        for n in ns:
            if isinstance(n, For) and n.task:
                if ev(n.lo, env) <= env[n.var] < ev(n.hi, env):
                    nodes(n.body, env, c)
            elif isinstance(n, For):
                for i in range(ev(n.lo, env), ev(n.hi, env)):
                    nodes(n.body, dict(env, **{n.var: i}), c)
            elif isinstance(n, When):
                if all(ev(x, env) >= 0 for x in n.conds):
                    nodes(n.body, env, c)
            elif isinstance(n, Stmt) and id(n) in targets:
                copy(n, env, c)

    for c, k in TASKS:
        nodes(dk.body, {"tc": c, "tk": k}, c)
    return out


def cluster_layout(writes, reads):
    """(base, Q, elements per cluster) such that cluster c's writes and reads lie in
    [base + c Q, base + c Q + elements), or None."""
    cs = sorted(writes)
    if not cs:
        return None
    for a, b in zip(cs, cs[1:]):
        if writes[a][1] > writes[b][0]:
            return None                 # clusters' write ranges overlap
    for c, r in reads.items():
        w = writes.get(c)
        if w is None or r[0] < w[0] or r[1] > w[1]:
            return None                 # a cluster reads what another wrote (or nobody)
    if len(cs) == 1:
        base, q = writes[cs[0]][0], 0
    else:
        q = (writes[cs[1]][0] - writes[cs[0]][0]) // (cs[1] - cs[0])
        base = writes[cs[0]][0] - cs[0] * q
    if any(writes[c][0] != base + c * q for c in cs) or q < 0:
        return None
    return base, q, max(writes[c][1] - (base + c * q) for c in cs)


def _candidates(program, ln, by):
    """Intermediates of launch `ln`: (root tensor, producer, consumers) with a single writer
    in the launch and every reader a later kernel of it."""
    outside = {r for dk in program.target_state.dev if dk.name not in ln.kernels for _, r in dk.params}
    io = {("tensor", program.root(t)) for t in list(program.inputs) + list(program.outputs)}
    # a Concat's slices and the Concat output share bytes: each is read or written through the other
    io |= {("tensor", program.root(t)) for t in program.slices} | {("tensor", program.root(c)) for c, _ in
                                                                   program.slices.values()}
    pos = {k: i for i, k in enumerate(ln.kernels)}
    seen, out = set(), []
    for name in ln.kernels:
        for _, ref in by[name].params:
            if ref in seen or ref in outside or ref in io:
                continue
            seen.add(ref)
            users, writer = [], []
            for k in ln.kernels:
                dk = by[k]
                g = [b for b, d in dk.bufs.items() if d.space == "GDRAM" and (("tensor", d.tensor) == ref)]
                if not g:
                    continue
                if len(g) != 1:
                    break
                cps = gdram_copies(dk, g[0])
                if cps is None:
                    break
                w = [s for s in cps if s.mapped.direction.endswith("2GDRAM")]
                users.append((k, g[0], cps))
                if w:
                    writer.append(k)
            else:
                if len(writer) != 1 or len(users) < 2:
                    continue
                w = writer[0]
                reads_only = all(not any(c.mapped.direction.endswith("2GDRAM") for c in cps)
                                 for k, _, cps in users if k != w)
                if reads_only and all(pos[k] > pos[w] for k, _, _ in users if k != w) and \
                        not any(c.mapped.direction.startswith("GDRAM2") for k, _, cps in users if k == w for c in cps):
                    out.append((ref, users))
    return out


def _io_waits_move_too(nodes):
    """After each __sync_io() a __sync_move(): a store or load that went GDRAM -> SRAM changed
    queues (IO -> move), and the pipelines' __sync_io() before the next load (pingpong.py)
    must still see it done, e.g. an in-place tile stored and reloaded."""
    out = []
    for n in nodes:
        if isinstance(n, (For, When)):
            n.body = _io_waits_move_too(n.body)
        out.append(n)
        if isinstance(n, Sync) and n.kind == "io":
            out.append(Sync("move"))
    return out


def to_sram(dk, sbuf, cps, shift, end, tensor):
    """Kernel dk's GDRAM copies `cps` of `tensor` moved to SRAM buffer `sbuf` (DBuf), element e
    of the GDRAM side at e - shift of it; `end`: the byte the kernel's SRAM use reaches."""
    dk.bufs[sbuf.name] = sbuf
    for s in cps:
        m = s.mapped
        side = "dst" if m.direction.endswith("2GDRAM") else "src"
        op = m.ops[side]
        m.ops = dict(m.ops, **{side: (sbuf.name, simp(Bin("-", op[1], shift))) + tuple(op[2:])})
        m.direction = m.direction.replace("GDRAM", "SRAM")
    dk.info["sram_bytes"] = max(int(dk.info.get("sram_bytes", 0)), end)
    if not dk.info.get("on_chip"):
        dk.body = _io_waits_move_too(dk.body)
    dk.info.setdefault("on_chip", []).append(tensor)


def keep_intermediates_on_chip(program, sram_limit):
    """Rewrite the launches' intermediates that pass the checks to SRAM; returns
    {tensor: {"launch", "bytes", "sram_offset"}} of those kept on chip."""
    st = program.target_state
    by = {dk.name: dk for dk in st.dev}
    kept = {}
    for ln in (st.launches or alone(st.dev)):
        if not ln.stitched:
            continue
        pos = {k: i for i, k in enumerate(ln.kernels)}
        floor = round_up(max(int(by[k].info.get("sram_bytes", 0)) for k in ln.kernels), ALIGN)
        placed = []       # (offset, bytes, first, last)
        for ref, users in _candidates(program, ln, by):
            writes, reads = {}, {}
            try:
                for k, g, cps in users:
                    for (c, rw), r in copy_ranges(by[k], {id(s) for s in cps}).items():
                        d = writes if rw == "w" else reads
                        d[c] = r if c not in d else (min(d[c][0], r[0]), max(d[c][1], r[1]))
            except Unpredictable:
                continue
            lay = cluster_layout(writes, reads)
            if lay is None:
                continue
            base, q, elems = lay
            eb = by[users[0][0]].bufs[users[0][1]].elem_bytes
            nbytes = round_up(elems * eb, ALIGN)
            first, last = min(pos[k] for k, _, _ in users), max(pos[k] for k, _, _ in users)
            off = floor
            for o, b, f, lst in sorted(placed):     # first fit among the buffers live at the same time
                if f <= last and first <= lst and o < off + nbytes and off < o + b:
                    off = round_up(o + b, ALIGN)
            if off + nbytes > sram_limit:
                continue
            placed.append((off, nbytes, first, last))
            shift = simp(Bin("+", iconst(base), Bin("*", Var("tc"), iconst(q))))
            sname = f"kept{len(kept)}"   # distinct per tensor (two names that sanitise alike would share one)
            for k, g, cps in users:
                gb = by[k].bufs[g]
                to_sram(by[k], DBuf(sname, "SRAM", elems, off, tensor=gb.tensor, ctype=gb.ctype,
                                    elem_bytes=gb.elem_bytes), cps, shift, off + nbytes, ref[1])
            kept[ref[1]] = {"launch": ln.name, "bytes": elems * eb, "sram_offset": off}
    return kept
