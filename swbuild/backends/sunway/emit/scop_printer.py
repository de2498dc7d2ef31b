"""Sunway C for planned SCoP regions: host file, slave file, shared header.

The host file is the user's file, byte for byte, except that each region becomes a block
that fills a parameter struct and spawns/joins its kernel (host loops around it when the
schedule keeps outer loops sequential, serial statements as macros). The slave file holds
one function per kernel: parameters by DMA, LDM buffers, the loop nest isl's AST generator
built from the tiled schedule Θ, and DMA transfer sets at each copy level. Athread v1 and
CRTS differ only in the spellings of cpe_api.py.
"""
from __future__ import annotations

from pathlib import Path

import islpy as isl
from pycparser import c_ast

from ...cexpr import c_macros
from . import scop_host
from .cpe_api import api_of, dma_call
from .isl_c import CWriter, body_c, build_ast, paren, pw_expr, sanitize, set_expr, stmt_macro

_HELPERS = c_macros("swk_", ["min", "max", "floord"])

_DMA = """\
typedef {reply} swk_reply_t;

/* Moves the box lo[d]..lo[d]+w[d]-1 of a row-major array (extents E, E[0] unused) between
 * main memory and a dense LDM buffer with as few DMA transfers as the layout allows:
 * trailing dimensions the box covers completely merge into one contiguous run, the next
 * dimension becomes the rows of one strided transfer, and only dimensions beyond that
 * loop. Returns the number of transfers issued: what the caller's reply word will count. */
static int swk_dma(int put, char *mem, char *ldm, long es, int nd, const long *E,
                   const long *lo, const long *w, swk_reply_t *rp)
{{
    long pitch[8], off = 0, run, rows = 1, gap = 0, outer = 1, idx, len;
    int d, k, n = 0;
    for (d = 0; d < nd; d++)
        if (w[d] <= 0) return 0;
    pitch[nd - 1] = es;
    for (d = nd - 2; d >= 0; d--) pitch[d] = pitch[d + 1] * E[d + 1];
    for (d = 0; d < nd; d++) off += lo[d] * pitch[d];
    d = nd - 1;
    while (d > 0 && w[d] == E[d]) d--;
    run = w[d] * pitch[d];
    /* the rows of the strided transfer: the next outer dimension with more than one index
     * (dimensions of one index in between just move the start) */
    for (k = d - 1; k >= 0 && w[k] == 1; k--)
        ;
    if (k >= 0) {{
        rows = w[k];
        gap = pitch[k] - run;
        d = k;
    }} else {{
        d = 0;
    }}
    for (k = 0; k < d; k++) outer *= w[k];
    len = rows * run;
    for (idx = 0; idx < outer; idx++) {{
        long rem = idx, o = off;
        char *m, *l = ldm + idx * len;
        for (k = d - 1; k >= 0; k--) {{
            o += (rem % w[k]) * pitch[k];
            rem /= w[k];
        }}
        m = mem + o;
        if (rows > 1 && gap > 0) {{
            if (put) {put}; else {get};
        }} else {{
            if (put) {put0}; else {get0};
        }}
        n++;
    }}
    return n;
}}
"""


def dma_helper(api):
    """swk_reply_t and swk_dma (above) spelled for the chip's API (cpe_api.py)."""
    return _DMA.format(reply=api.reply, **{
        name: dma_call(api, d, strided, mem="m", ldm="l", len="len", gap="gap", bsize="run", rp="rp")
        for name, d, strided in (("get", "get", True), ("get0", "get", False), ("put", "put", True), ("put0", "put", False))})


class ScopPrinter:
    def __init__(self, tc, source, stem):
        self.tc, self.source, self.stem = tc, Path(source), sanitize(stem)
        self.file_stem = stem            # for file names; self.stem for C identifiers
        self.api = api_of(tc)
        self.structs, self.externs = [], []
        self._copy_cache = {}
        self._launched = set()

    def kname(self, region, k):
        return f"swk_{self.stem}_r{region.index}_k{k}"

    # -- host
    def host_file(self, text, plans):
        lines = self._lines = text.split("\n")
        out = []
        spans = {p.region.start_line: p for p in plans if not p.serial}
        i = 0
        base = self.source.name
        out.append(f'#include "{self.file_stem}_scop.h"')
        out.append(f'#line 1 "{base}"')
        while i < len(lines):
            ln = i + 1
            if ln in spans:
                p = spans[ln]
                out.extend(self.host_region(p))
                out.append(f'#line {p.region.end_line + 1} "{base}"')
                i = p.region.end_line
                continue
            out.append(lines[i])
            i += 1
        return "\n".join(out)

    def host_region(self, p):
        r = p.region
        out = [f"{{ /* swbuild scop: region {r.index} ({self.source.name}:{r.start_line}-{r.end_line}), "
               f"{len(p.kernels)} CPE kernel(s) */"]
        out += scop_host.guard(p, self.source.name)
        if scop_host.partial(p):
            return out + scop_host.fallback(p, self.source.name, self._lines, self._generated(p)) + ["}"]
        return out + self._generated(p) + ["}"]

    def _generated(self, p):
        r = p.region
        out = []
        pre, post = scop_host.expanded_scalars(p, self.source.name)
        out += pre
        macros = []
        for name in p.host.serial:
            st = p.model.stmts[name]
            mac = f"SWK_R{r.index}_{name}"
            text = body_c(st, lambda k, subs, st=st: st.refs[k].array + "".join(f"[{s}]" for s in subs))
            macros.append(mac)
            out.append(stmt_macro(mac, st, text))
        kernels = {f"K{kp.kernel.index}": kp for kp in p.kernels}

        def user(name, args):
            if name in kernels:
                return self.launch(r, kernels[name], args)
            return [f"SWK_R{r.index}_{name}({', '.join(args)});"]

        ctx = isl.Set.universe(p.host.schedule.get_space().params())
        ast = build_ast(p.host.schedule, ctx)
        body = []
        CWriter({}, user).node(ast, 1, body)
        out += body
        out += [f"#undef {m}" for m in macros]
        out += post
        # the region no longer uses the iterators the function declared for it
        its = sorted(r.outer_iters)
        if its:
            out.append("    " + " ".join(f"(void){i};" for i in its))
        return out

    def launch(self, r, kp, args):
        k = kp.kernel
        name = self.kname(r, k.index)
        used = self.kernel_symbols(r, kp)
        fields, sets = [], []
        for a in used["arrays"]:
            arr = r.arrays[a]
            fields.append(f"{arr.ctype} *{a};")
            sets.append(f"swk_a.{a} = ({arr.ctype} *)({a});")
            for q in range(1, len(arr.const_dims)):
                if arr.const_dims[q] is None:
                    fields.append(f"long {a}_E{q};")
                    sub = "[0]" * q
                    sets.append(f"swk_a.{a}_E{q} = (long)(sizeof(({a}){sub}) / sizeof(({a}){sub}[0]));")
        for s in used["scalars"]:
            fields.append(f"{r.scalars[s]} {s};")
            sets.append(f"swk_a.{s} = {s};")
        for q in range(k.prefix_len):
            fields.append(f"long swk_o{q};")
            sets.append(f"swk_a.swk_o{q} = {args[q]};")
        if not fields:
            fields.append("int swk_unused;")
        if name not in self._launched:         # isl may place a launch more than once
            self._launched.add(name)
            self.structs.append(f"struct {name}_args {{\n" + "".join(f"    {f}\n" for f in fields) + "};")
            self.externs.append(f"extern void SLAVE_FUN({name})(void *);")
        return ["{", f"    struct {name}_args swk_a;"] + ["    " + s for s in sets] + \
            [f"    swk_{self.stem}_start();", f"    athread_spawn({name}, &swk_a);", "    athread_join();", "}"]

    def kernel_symbols(self, r, kp):
        arrays = sorted({g.array for g in kp.groups})
        scalars = set()
        for name in kp.kernel.stmts:
            scalars |= _scalars_of(r, r_stmt(r, name))
        scalars |= set(r.params)
        return {"arrays": arrays, "scalars": sorted(scalars)}

    # -- slave
    def slave_kernel(self, r, kp):
        k, t = kp.kernel, kp.tiling
        name = self.kname(r, k.index)
        api = self.api
        used = self.kernel_symbols(r, kp)
        L = [f"/* region {r.index} ({self.source.name}:{r.start_line}), kernel {k.index}: "
             f"statements {', '.join(k.stmts)}; mapped band members {list(t.members)} over "
             f"{'x'.join(map(str, t.grid))} CPEs; tile sizes {t.sizes}; LDM {t.ldm_bytes} bytes */",
             f"void {name}(void *swk_arg)", "{",
             f"    struct {name}_args swk_p;",
             "    swk_reply_t swk_rp = 0;"]
        L.append("    " + self._get("swk_arg", "&swk_p", "sizeof swk_p", "swk_rp", 1))
        L.append(f"    const int swk_id = {api.tid};")
        L.append("    const int swk_row = swk_id / 8, swk_col = swk_id % 8;")
        for a in used["arrays"]:
            arr = r.arrays[a]
            dims = ", ".join(["0"] + [str(d) if d is not None else f"swk_p.{a}_E{q}"
                                      for q, d in enumerate(arr.const_dims) if q > 0])
            L.append(f"    {arr.ctype} *const swk_g_{a} = swk_p.{a};")
            L.append(f"    const long swk_E_{a}[{len(arr.const_dims)}] = {{{dims}}};")
        for s in used["scalars"]:
            L.append(f"    const {r.scalars[s]} {s} = swk_p.{s};")
        for q in range(k.prefix_len):
            L.append(f"    const long swk_o{q} = swk_p.swk_o{q}; (void)swk_o{q};")
        for g in kp.groups:
            arr = r.arrays[g.array]
            nb = g.elems * g.esize
            nd = len(g.extents)
            L.append(f"    {arr.ctype} *const swk_b{g.index} = ({arr.ctype} *)ldm_malloc({nb}); "
                     f"/* {g.array} {'x'.join(map(str, g.extents))}, {'read-write' if g.rw else 'read'} */")
            L.append(f"    long swk_b{g.index}_lo[{nd}] = {{0}}, swk_b{g.index}_w[{nd}] = {{0}};")
        for lv in kp.levels:
            L.append(f"    swk_reply_t swk_rp{lv.depth};")
        L.append("    (void)swk_row; (void)swk_col;")
        macros = []
        gmap = {}
        for g in kp.groups:
            for ref in g.refs:
                gmap[(ref.stmt, ref.k)] = g
        for sname in k.stmts:
            st = r_stmt(r, sname)
            mac = f"SWK_{sname}"
            macros.append(mac)
            L.append(stmt_macro(mac, st, body_c(st, lambda q, subs, s=sname: _buf_ref(gmap[(s, q)], subs))))
        levels = {f"CI{lv.depth}": (lv, False) for lv in kp.levels}
        levels.update({f"CO{lv.depth}": (lv, True) for lv in kp.levels})
        names = {"swk_id": "swk_id", "swk_row": "swk_row", "swk_col": "swk_col"}
        ctx = self.kernel_context(r, kp)

        # Two ASTs: the tile loops with the copy statements and one TILE statement per tile,
        # then the point loops of one tile with the tile iterators as parameters. isl builds
        # the two small problems several times faster than the whole tiled schedule at once.
        nt = len(kp.tiling.order)
        tiles, points = _split_theta(kp.theta, nt)
        tctx = _params_from(tiles, "swk_t", ctx)
        inner = []
        CWriter(names, lambda sname, args: [f"SWK_{sname}({', '.join(args)});"]).node(
            build_ast(points, tctx), 1, inner)

        def user(sname, args):
            if sname in levels:
                lv, out = levels[sname]
                return self.copy_code(r, lv, out, args, ctx)
            head = [f"    const long swk_t{q} = {args[q]}; (void)swk_t{q};" for q in range(nt)]
            return ["{"] + head + inner + ["}"]

        ast = build_ast(_tile_sched(tiles, nt, kp.theta).union(kp.copy_sched), ctx)
        body = []
        CWriter(names, user, iter_prefix="swk_u").node(ast, 1, body)
        L += body
        L += [f"#undef {m}" for m in macros]
        for g in reversed(kp.groups):
            L.append(f"    ldm_free(swk_b{g.index}, {g.elems * g.esize});")
        L.append("}")
        return "\n".join(L)

    def kernel_context(self, r, kp):
        k = kp.kernel
        cons = []
        if kp.tiling.grid == (64,):
            prm = ["swk_id"]
            cons.append("0 <= swk_id < 64")
        else:
            prm = ["swk_row", "swk_col"]
            cons += ["0 <= swk_row < 8", "0 <= swk_col < 8"]
        ctx = isl.Set(f"[{', '.join(prm)}] -> {{ : {' and '.join(cons)} }}")
        if k.prefix_len:
            launch = k.launch.reset_tuple_id()
            for q in range(k.prefix_len):
                launch = launch.set_dim_name(isl.dim_type.set, q, f"swk_o{q}")
            n = launch.dim(isl.dim_type.param)
            launch = launch.move_dims(isl.dim_type.param, n, isl.dim_type.set, 0, k.prefix_len).params()
            ctx = ctx.align_params(launch.get_space()).intersect(launch.align_params(ctx.get_space()))
        else:
            ctx = ctx.align_params(k.launch.get_space()).intersect_params(
                k.launch.params().align_params(ctx.get_space()))
        return ctx

    def copy_code(self, r, lv, out, args, kctx):
        """One transfer set: every group copied at this level, one reply word, one wait.
        The body depends only on the level; isl may place the statement more than once."""
        key = (id(lv), out)
        if key not in self._copy_cache:
            self._copy_cache[key] = self._copy_body(lv, out, kctx)
        d = lv.depth
        head = ["{"] + [f"    const long swk_t{q} = {args[q]}; (void)swk_t{q};" for q in range(d)]
        return head + self._copy_cache[key] + ["}"]

    def _copy_body(self, lv, out, kctx):
        api = self.api
        d = lv.depth
        names = {f"swk_t{q}": f"swk_t{q}" for q in range(d)}
        rp = f"swk_rp{d}"
        L = ["    int swk_n = 0;", f"    {rp} = 0;"]
        ctx = _ctx_for(kctx, lv)
        build = isl.AstBuild.from_context(ctx)
        for c in lv.copies:
            g = c.group
            if out and not g.rw:
                continue
            b = f"swk_b{g.index}"
            nd = len(g.extents)
            guard = None
            gdom = c.domain
            if not ctx.align_params(gdom.get_space()).is_subset(gdom.align_params(ctx.get_space())):
                guard = set_expr(gdom, ctx, names, build)
            ind = "    "
            if guard:
                L.append(f"    if {paren(guard)} {{")
                ind = "        "
            if not out:
                for q in range(nd):
                    lo = pw_expr(c.lo[q], ctx, names, build)
                    hi = pw_expr(c.hi[q], ctx, names, build)
                    L.append(f"{ind}{b}_lo[{q}] = {lo};")
                    L.append(f"{ind}{b}_w[{q}] = {hi} - {b}_lo[{q}] + 1;")
            if out or c.copy_in:
                L.append(f"{ind}swk_n += swk_dma({int(out)}, (char *)swk_g_{g.array}, (char *){b}, {g.esize}, "
                         f"{nd}, swk_E_{g.array}, {b}_lo, {b}_w, &{rp});")
            if guard:
                L.append("    }")
        L.append("    " + api.wait.format(r=rp, n="swk_n") + ";")
        return L

    def _get(self, src, dst, ln, rp, n):
        return (dma_call(self.api, "get", False, mem=src, ldm=dst, len=ln, rp=f"&{rp}") + "; "
                + self.api.wait.format(r=rp, n=n) + ";")

    def slave_file(self, plans, header):
        api = self.api
        out = [f"/* Generated by swbuild scop from {self.source.name}: CPE kernels. Do not edit. */",
               "#define SWK_SLAVE_SIDE 1", api.include, *([api.wait_macro] if api.wait_macro else []),
               "#include <math.h>", f'#include "{header}"', "",
               _HELPERS, dma_helper(api)]
        for p in plans:
            if p.serial:
                continue
            for kp in p.kernels:
                out.append(self.slave_kernel(p.region, kp))
                out.append("")
        return "\n".join(out)

    def header(self, guard):
        return "\n".join([
            f"/* Generated by swbuild scop from {self.source.name}: parameter structs shared by "
            "host and CPE code. Do not edit. */",
            f"#ifndef {guard}", f"#define {guard}", ""] + self.structs + [
            "", "#ifndef SWK_SLAVE_SIDE", "#include <stdio.h>", "#include <stdlib.h>", "#include <athread.h>", _HELPERS.rstrip()]
            + self.externs + [
            f"static int swk_{self.stem}_started;",
            f"static inline void swk_{self.stem}_halt(void) {{ athread_halt(); }}",
            f"static inline void swk_{self.stem}_start(void)",
            "{",
            f"    if (swk_{self.stem}_started) return;",
            f"    swk_{self.stem}_started = 1;",
            "    athread_init();",
            f"    atexit(swk_{self.stem}_halt);",
            "}",
            "#endif", "", f"#endif /* {guard} */", ""])


def _split_theta(theta, nt):
    """Θ = [1, t0, ..., 1, t_{nt-1}, 1, local...] -> (TILE[t...] points where some
    statement runs, per-tile schedule of the statements with t as parameters swk_t<k>)."""
    tiles = points = None
    maps = []
    theta.foreach_map(maps.append)
    for m in maps:
        total = m.dim(isl.dim_type.out)
        pre = m.project_out(isl.dim_type.out, 2 * nt, total - 2 * nt)
        for k in reversed(range(nt)):
            pre = pre.project_out(isl.dim_type.out, 2 * k, 1)
        t = pre.range()
        tiles = t if tiles is None else tiles.union(t)
        p = m
        for k in range(nt):
            p = p.set_dim_name(isl.dim_type.out, 2 * k + 1, f"swk_t{k}")
        for k in reversed(range(nt)):
            p = p.move_dims(isl.dim_type.param, p.dim(isl.dim_type.param), isl.dim_type.out, 2 * k + 1, 1)
        p = isl.UnionMap(p.project_out(isl.dim_type.out, 0, nt + 1))
        points = p if points is None else points.union(p)
    return tiles.coalesce().set_tuple_name("TILE"), points


def _tile_sched(tiles, nt, theta):
    """TILE[t...] -> [1, t0, ..., 1, t_{nt-1}, 1, 0...] in Θ's layout."""
    maps = []
    theta.foreach_map(maps.append)
    total = maps[0].dim(isl.dim_type.out)
    ts = [f"t{k}" for k in range(nt)]
    vals = []
    for t in ts:
        vals += ["1", t]
    vals += ["1"] + ["0"] * (total - 2 * nt - 1)
    m = isl.Map(f"{{ TILE[{', '.join(ts)}] -> [{', '.join(vals)}] }}").align_params(tiles.get_space())
    return isl.UnionMap(m.intersect_domain(tiles))


def _params_from(dom, prefix, kctx):
    """kctx with the dimensions of `dom` as parameters <prefix><k>, bounded by dom."""
    d = dom.dim(isl.dim_type.set)
    dom = dom.reset_tuple_id()
    for q in range(d):
        dom = dom.set_dim_name(isl.dim_type.set, q, f"{prefix}{q}")
    dom = dom.move_dims(isl.dim_type.param, dom.dim(isl.dim_type.param), isl.dim_type.set, 0, d).params()
    return kctx.align_params(dom.get_space()).intersect(dom.align_params(kctx.get_space()))


def _ctx_for(kctx, lv):
    """Context for copy bounds: the kernel's, with the copy level's tile iterators as
    parameters swk_t<q> bounded by the points where the copy statement runs."""
    d = lv.depth
    dom = lv.domain.reset_tuple_id()
    for q in range(d):
        dom = dom.set_dim_name(isl.dim_type.set, q, f"swk_t{q}")
    dom = dom.move_dims(isl.dim_type.param, dom.dim(isl.dim_type.param), isl.dim_type.set, 0, d).params()
    return kctx.align_params(dom.get_space()).intersect(dom.align_params(kctx.get_space()))


def r_stmt(r, name):
    return next(s for s in r.stmts if s.name == name)


def _scalars_of(r, st):
    out = set()

    def go(n):
        if isinstance(n, c_ast.ID) and n.name in r.scalars and n.name not in st.iters:
            out.add(n.name)
        if isinstance(n, c_ast.FuncCall):
            if n.args:
                go(n.args)
            return
        for _, ch in n.children():
            go(ch)
    go(st.node)
    return out


def _buf_ref(g, subs):
    b = f"swk_b{g.index}"
    e = f"(({subs[0]}) - {b}_lo[0])"
    for q in range(1, len(subs)):
        e = f"({e} * {b}_w[{q}] + (({subs[q]}) - {b}_lo[{q}]))"
    return f"{b}[{e}]"


def print_files(tc, source, text, plans, out_dir, stem=None):
    """Write <stem>_host.c, <stem>_slave.c, <stem>_scop.h; returns their paths."""
    source = Path(source)
    stem = stem or source.stem
    pr = ScopPrinter(tc, source, stem)
    host = pr.host_file(text, plans)
    slave = pr.slave_file(plans, f"{stem}_scop.h")
    header = pr.header(f"SWK_{pr.stem.upper()}_SCOP_H")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"host": out_dir / f"{stem}_host.c", "slave": out_dir / f"{stem}_slave.c",
             "header": out_dir / f"{stem}_scop.h"}
    for key, content in (("host", host), ("slave", slave), ("header", header)):
        _write_if_changed(paths[key], content + ("" if content.endswith("\n") else "\n"))
    return paths


def _write_if_changed(path, content):
    if path.exists() and path.read_text() == content:
        return
    path.write_text(content)
