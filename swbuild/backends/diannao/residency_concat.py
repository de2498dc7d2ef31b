"""Concat outputs kept in SRAM (option `sram_concats`, issue 34): residency.py for a channel
Concat written in place (concat_slices.py), whose inputs are slices of its output.

A DenseNet dense block is one NHWC Concat whose channels its layers write one slice after the
other, and every later layer's BatchNorm reads all the channels before it: through GDRAM that
is written once and read once per later layer. residency.py keeps only single-writer tensors
and leaves slices and their containers in GDRAM. Here the outermost container and every slice
of it are one SRAM buffer per cluster: each user's copies are taken in the container's element
coordinates (a slice's pointer is the container's plus its offset), and the same check as
residency.py's runs on the final device IR: over every writer and reader of the launch, each
cluster's writes (hull) disjoint from the other clusters', every cluster's reads inside its
own writes, the ranges starting base + clusterId x Q. A kernel that reads and writes the same
bytes (a slice and its container), any user outside the launch, a non-copy access or a graph input or output keeps it
in GDRAM. Containers are placed first (the longest-lived buffers of a launch), first fit over
their live ranges (first .. last user) above the launch's own SRAM use.
"""
from __future__ import annotations

from ...ir.loopnest import Bin, Var, iconst
from ...ir.sizes import round_up
from ..launches import alone
from .devir import DBuf, simp
from .residency import ALIGN, gdram_copies, cluster_layout, copy_ranges, to_sram
from .traffic import Unpredictable


def _outer(program, t):
    """(outermost container of t, t's byte offset in it)."""
    off = 0
    while t in program.slices:
        t, o = program.slices[t]
        off += o
    return t, off


def _overlap(program, a, b):
    """Members a and b share bytes: the same tensor, or one contains the other."""
    def chain(t):
        out = [t]
        while t in program.slices:
            t = program.slices[t][0]
            out.append(t)
        return out
    return a in chain(b) or b in chain(a)


def _groups(program, ln, by):
    """{container: {member tensor: byte offset}} of the Concats whose members the launch uses."""
    members = set(program.slices) | {c for c, _ in program.slices.values()}
    out = {}
    for k in ln.kernels:
        for _, ref in by[k].params:
            if ref[0] == "tensor" and ref[1] in members:
                c, off = _outer(program, ref[1])
                out.setdefault(c, {})[ref[1]] = off
    return out


def keep_concats_on_chip(program, sram_limit):
    """Rewrite the launches' Concat containers that pass the checks to SRAM; returns
    {container: {"launch", "bytes", "sram_offset", "slices"}}."""
    st = program.target_state
    by = {dk.name: dk for dk in st.dev}
    io = {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    kept = {}
    for ln in (st.launches or alone(st.dev)):
        if not ln.stitched:
            continue
        pos = {k: i for i, k in enumerate(ln.kernels)}
        outside = {r for dk in st.dev if dk.name not in ln.kernels for _, r in dk.params}
        floor = round_up(max(int(by[k].info.get("sram_bytes", 0)) for k in ln.kernels), ALIGN)
        placed = []
        for cont, mem in sorted(_groups(program, ln, by).items()):
            if (set(mem) | {cont}) & io or any(("tensor", t) in outside for t in set(mem) | {cont}):
                continue
            users, ok = [], True       # (kernel, gdram buf, copies, element offset of its member)
            for k in ln.kernels:
                dk = by[k]
                for b, d in dk.bufs.items():
                    if d.space != "GDRAM" or d.tensor not in mem:
                        continue
                    cps = gdram_copies(dk, b)
                    if cps is None or mem[d.tensor] % d.elem_bytes:
                        ok = False
                        break
                    users.append((k, b, cps, mem[d.tensor] // d.elem_bytes))
                if not ok:
                    break
            if not ok or len({k for k, *_ in users}) < 2:
                continue
            roles = {}          # kernel -> {"r": members read, "w": members written}
            for k, b, cps, _ in users:
                for c in cps:
                    rw = "w" if c.mapped.direction.endswith("2GDRAM") else "r"
                    roles.setdefault(k, {"r": set(), "w": set()})[rw].add(by[k].bufs[b].tensor)
            # a kernel may read one slice and write another (not overlapping ones: the same
            # bytes read and written by one kernel are left to GDRAM)
            if any(_overlap(program, a, b) for r in roles.values() for a in r["r"] for b in r["w"]) \
                    or not any(r["w"] for r in roles.values()) or not any(r["r"] for r in roles.values()):
                continue
            writes, reads = {}, {}
            try:
                for k, b, cps, eo in users:
                    for (c, rw), r in copy_ranges(by[k], {id(s) for s in cps}).items():
                        d = writes if rw == "w" else reads
                        r = (r[0] + eo, r[1] + eo)
                        d[c] = r if c not in d else (min(d[c][0], r[0]), max(d[c][1], r[1]))
            except Unpredictable:
                continue
            lay = cluster_layout(writes, reads)
            if lay is None:
                continue
            base, q, elems = lay
            eb = by[users[0][0]].bufs[users[0][1]].elem_bytes
            if any(by[k].bufs[b].elem_bytes != eb for k, b, *_ in users):
                continue
            nbytes = round_up(elems * eb, ALIGN)
            first, last = min(pos[k] for k, *_ in users), max(pos[k] for k, *_ in users)
            off = floor
            for o, nb, f, lst in sorted(placed):     # first fit among the containers live at the same time
                if f <= last and first <= lst and o < off + nbytes and off < o + nb:
                    off = round_up(o + nb, ALIGN)
            if off + nbytes > sram_limit:
                continue
            placed.append((off, nbytes, first, last))
            sname = f"keptc{len(kept)}"
            for k, b, cps, eo in users:
                # element e of the member is element e + eo of the container, at
                # e + eo - base - clusterId x Q of the cluster's SRAM buffer
                shift = simp(Bin("-", Bin("+", iconst(base), Bin("*", Var("tc"), iconst(q))), iconst(eo)))
                to_sram(by[k], DBuf(sname, "SRAM", elems, off, tensor=cont, ctype=by[k].bufs[b].ctype, elem_bytes=eb),
                        cps, shift, off + nbytes, cont)
            kept[cont] = {"launch": ln.name, "bytes": elems * eb, "sram_offset": off, "slices": sorted(mem)}
    return kept
