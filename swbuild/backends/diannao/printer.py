"""BANG C text: the device file (.mlu: kernels, on-chip arenas, launch wrappers), the host
file (CNRT: device memory, the weights image, the calls in topological order), the public
header, the weights blob and the runner.

On-chip memory is one arena per space at file scope, shared by all kernels of the model
(`__nram__ char <P>_nram[...]`): the emulator, like cncc, checks the sum of all
declarations against the capacity. Kernels are UNION1 launches of 16 tasks; a host-side
launch wrapper in the .mlu keeps `<<< >>>` (or the emulator's BANGEMU_LAUNCH) out of the
host file.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.graph import is_splat
from ...ir.loopnest import Bin, Const, index_range, iter_loads, substitute_acc
from ...support.names import c_comment
from .. import cexpr, common, watchdog
from ..blob import WeightsBlob
from ..runner_main import runner_main, tensors
from ..cexpr import COMBINE, CTYPE, Writer as W
from .devir import Barrier, For, ScalarLoad, Stmt, Sync, When, const, simp
from .recurrence import recurrence_body
from .scalar_ops import MACRO as SCALAR_MACRO, expr_ops, kernel_item_ops, stmt_ops
from .stitch import launch_params, launches_of

TASK_VARS = {"tc": "clusterId", "tk": "coreId"}
SYNC = {"io": "__sync_io();", "move": "__sync_move();", "compute": "__sync_compute();", "all": "__sync_io_move_compute();"}
INIT = {"sum": 0.0, "avg": 0.0, "max": -math.inf, "min": math.inf, "prod": 1.0}


class KernelPrinter:
    def __init__(self, dk, P, banks=64):
        self.dk, self.P, self.banks = dk, P, banks
        self.w = W()

    # -- expressions ----------------------------------------------------------------
    def var(self, name):
        return TASK_VARS.get(name, name)

    def ix(self, e):
        return cexpr.render(simp(e), self.var, None)

    def ptr(self, buf, off):
        b = self.dk.bufs[buf]
        c = const(off)
        tail = "" if c == 0 else f" + {self.ix(off)}" if c is None or c > 0 else f" - {-c}"
        if b.space == "GDRAM":       # float * parameters; an int8 tensor (schedule/narrow.py) is read as bytes
            return f"{buf}{tail}" if b.ctype == "float" else f"(({b.ctype} *){buf}{tail})"
        arena = {"NRAM": "nram", "WRAM": "wram", "SRAM": "sram"}[b.space]
        base = f"({b.ctype} *)({self.P}_{arena} + {b.offset})" if b.offset else f"({b.ctype} *){self.P}_{arena}"
        return f"({base}{tail})" if tail else base

    def access(self, ld):
        b = self.dk.bufs[ld.buf]
        if b.layout and len(ld.index) == 2:   # bank layout, element (co, k)
            _, co_n, kk = b.layout
            banks = self.banks
            co = self.ix(ld.index[0])
            slot = f"(({co}) % {banks} * {co_n // banks} + ({co}) / {banks})"
            return f"({self.ptr(ld.buf, Const(0, 'int'))})[{slot} * {kk} + {self.ix(ld.index[1])}]"
        return f"({self.ptr(ld.buf, Const(0, 'int'))})[{self.ix(ld.index[0])}]"

    def fexpr(self, e):
        return cexpr.render(e, self.var, self.access)

    def cond(self, conds):
        return " && ".join(f"{self.ix(c)} >= 0" for c in conds) or "1"

    # -- tree -----------------------------------------------------------------------
    def body(self, nodes):
        w = self.w
        for n in nodes:
            if isinstance(n, For) and n.task:
                lo, hi = const(n.lo), const(n.hi)
                v = TASK_VARS["tc" if n.task == "cluster" else "tk"]
                full = lo == 0 and hi == 4
                if full:
                    self.body(n.body)
                    continue
                if hi - lo == 1:
                    w.open(f"if ({v} == {lo})")
                elif lo == 0:
                    w.open(f"if ({v} < {hi})")
                elif hi == 4:
                    w.open(f"if ({v} >= {lo})")
                else:
                    w.open(f"if ({v} >= {lo} && {v} < {hi})")
                self.body(n.body)
                w.close()
            elif isinstance(n, For):
                w.open(f"for (int {n.var} = {self.ix(n.lo)}; {n.var} < {self.ix(n.hi)}; ++{n.var})")
                self.body(n.body)
                w.close()
            elif isinstance(n, When):
                w.open(f"if ({self.cond(n.conds)})" if n.conds else "")
                if not n.conds:
                    w.lines[-1] = "    " * (w.depth - 1) + "{"
                self.body(n.body)
                w.close()
            elif isinstance(n, Barrier):
                w("__sync_cluster();" if n.kind == "cluster" else "__sync_all();")
            elif isinstance(n, Sync):
                w(SYNC[n.kind])
            elif isinstance(n, ScalarLoad):
                load = f"{n.src.buf}[{self.ix(n.src.index[0])}]"
                if n.guard:
                    load = f"({self.cond(n.guard)}) ? {load} : 0.0f"
                w(f"const float {n.name} = {load};")
                w(f"SWB_SCALAR({1 + len(n.guard)});")
            elif isinstance(n, Stmt):
                self.stmt(n)

    def stmt(self, s):
        w = self.w
        m = s.mapped
        if m is not None:
            fixed = [m.params[k] if isinstance(m.params[k], int) else const(m.params[k])
                     for k in ("n", "segs") if k in m.params]
            if any(v is not None and v <= 0 for v in fixed):
                return      # statically empty (a pipelined tile's piece of nothing): no instruction, no segnum -1
            opened = 0
            for lp in m.outer:
                w.open(f"for (int {lp.var} = {self.ix(lp.lo)}; {lp.var} < {self.ix(simp(Bin('+', lp.lo, lp.ext)))}; ++{lp.var})")
                opened += 1
            dyn = [k for k in ("n", "segs") if k in m.params and not isinstance(m.params[k], int) and const(m.params[k]) is None]
            ctx = Emit(self, m, s.asynchronous, s.dst_cluster)
            if dyn:   # run-time sizes (guards resolved without partitioning): name them, skip empty ones
                w.open("")
                w.lines[-1] = "    " * (w.depth - 1) + "{"
                for k in dyn:
                    w(f"const int {k}_ = {self.ix(m.params[k])};")
                    ctx.local[k] = f"{k}_"
                w(f"if ({' && '.join(f'{k}_ > 0' for k in dyn)}) {m.desc.emit(ctx)}")
                w.close()
            else:
                w(m.desc.emit(ctx))
            for _ in range(opened):
                w.close()
            return
        # scalar: plain loops (counted as not tensorized)
        w(f"/* scalar: {c_comment(s.sid)} */")
        per = stmt_ops(s)
        exts = [const(lp.ext) for lp in s.loops]
        # charged once before the nest when every trip count is static, else per iteration
        hoist = per is not None and all(e is not None for e in exts)
        if hoist:
            w(f"SWB_SCALAR({per * math.prod(exts)}L);")
        for lp in s.loops:
            w.open(f"for (int {lp.var} = {self.ix(lp.lo)}; {lp.var} < {self.ix(simp(Bin('+', lp.lo, lp.ext)))}; ++{lp.var})")
        if not hoist and per is not None:
            w(f"SWB_SCALAR({per});")
        if s.guard or s.guard_any:
            g = self.cond(s.guard) if s.guard else "1"
            if s.guard_any:
                g += " && (" + " || ".join(f"{self.ix(c)} >= 0" for c in s.guard_any) + ")"
            w.open(f"if ({g})")
        if s.combine:
            w(f"float acc = {cexpr.float_literal(INIT[s.combine])};")
            for lp in s.red:
                w.open(f"for (int {lp.var} = {self.ix(lp.lo)}; {lp.var} < {self.ix(simp(Bin('+', lp.lo, lp.ext)))}; ++{lp.var})")
            w(COMBINE[s.combine].format(a="acc", v=self.fexpr(s.expr)))
            if per is None:     # a run-time reduction length: charged per step
                w(f"SWB_SCALAR({expr_ops(s.expr) + 1});")
            for _ in s.red:
                w.close()
            if s.combine == "avg":
                cnt = math.prod(const(lp.ext) for lp in s.red)
                w(f"{self.access(s.dst)} = acc / {cexpr.float_literal(float(cnt))};")
            else:
                w(f"{self.access(s.dst)} = acc;")
        else:
            w(f"{self.access(s.dst)} = {self.fexpr(s.expr)};")
        if s.guard or s.guard_any:
            w.close()
        for _ in s.loops:
            w.close()


class Emit:
    """What an instruction description's `emit` reads."""

    def __init__(self, kp, m, asynchronous=False, dst_cluster=None):
        self.kp, self.m = kp, m
        self.memcpy = "__memcpy_async" if asynchronous else "__memcpy"
        self.direction = m.direction
        self.local = {}
        assert dst_cluster is None or (not asynchronous and m.direction == "SRAM2SRAM")   # no async form
        # a copy into another cluster's SRAM: the id_dst_cluster argument of __memcpy
        self.to_cluster = "" if dst_cluster is None else f", {kp.ix(dst_cluster)}"

    def ptr(self, op):
        buf, off = self.m.ops[op][0], self.m.ops[op][1]
        return self.kp.ptr(buf, off)

    def val(self, p):
        if p in self.local:
            return self.local[p]
        v = self.m.params[p]
        return str(v) if isinstance(v, int) else self.kp.ix(v)

    def ctype(self):
        return self.kp.dk.bufs[self.m.ops["dst"][0]].ctype

    def elem_bytes(self):
        """Bytes of a copy's element (its operands agree: int8 tensors are copied as bytes)."""
        return self.kp.dk.bufs[self.m.ops["dst"][0]].elem_bytes

    def bytes(self, p):
        eb = self.elem_bytes()
        if p in self.local:
            return f"{self.local[p]} * {eb}"
        v = self.m.params[p]
        return str(eb * v) if isinstance(v, int) else f"({self.kp.ix(v)}) * {eb}"

    def scalar(self, name):
        e = self.m.scalars[name]
        return self.kp.fexpr(e)


# ---- scalar-class kernels -------------------------------------------------------------

def scalar_kernel(dk, P):
    k = dk.kernel
    w = W()
    views = dk.gview
    sp, red = list(k.axes), list(k.reduce_axes)
    total = math.prod(a.extent for a in sp)
    full = {a.name: (0, a.extent - 1) for a in sp + red}

    def load(ld):
        g, st, shape, dtype = views[ld.buf]
        if dtype != "float32":
            g = f"(({CTYPE[dtype]} *){g})"
        # an index may itself read data (Gather): render it with loads, as an integer; a
        # negative one counts from the end of its axis (Gather's and GatherND's rule)
        idx = [cexpr.render(e, lambda n: n, load) if cexpr.is_int(e) else
               f"((long)({cexpr.render(e, lambda n: n, load)}) + ((long)({cexpr.render(e, lambda n: n, load)}) < 0 "
               f"? {shape[d]} : 0))" for d, e in enumerate(ld.index)]
        off = " + ".join(f"(long)({i}) * {s}" for i, s in zip(idx, st) if s) or "0"
        text = cexpr.to_float(dtype, f"{g}[{off}]")
        if ld.pad is None:
            return text
        conds = []
        for d, e in enumerate(ld.index):
            lo, hi = index_range(e, full)
            if lo < 0:
                conds.append(f"({idx[d]}) >= 0")
            if hi > shape[d] - 1:
                conds.append(f"({idx[d]}) < {shape[d]}")
        return f"(({' && '.join(conds)}) ? {text} : {cexpr.float_literal(ld.pad)})" if conds else text

    w(f"const long total = {total}L;")
    w("const long per = (total + taskDim - 1) / taskDim;")
    w("const long lo = (long)taskId * per, hi = SW_MIN(total, lo + per);")

    def ops(e):     # expr_ops plus what `load` adds: bound compares of padded reads, negative-index fixes
        n = expr_ops(e)
        for ld in iter_loads(e):
            shape = views[ld.buf][2]
            n += sum(2 for x in ld.index if not cexpr.is_int(x))
            if ld.pad is not None:
                rng = [index_range(x, full) for x in ld.index]
                n += sum((lo < 0) + (hi > shape[d] - 1) for d, (lo, hi) in enumerate(rng))
        return n
    if k.combine:
        item = kernel_item_ops(k, ops(k.body), ops(k.epilogue), math.prod(a.extent for a in red))
    else:
        item = kernel_item_ops(k, 0, ops(substitute_acc(k.epilogue, k.body)), 1)
    w(f"if (hi > lo) SWB_SCALAR((hi - lo) * {item}L);")
    w.open("for (long it = lo; it < hi; ++it)")
    w("long rem = it;")
    for a in reversed(sp):
        w(f"const int {a.name} = (int)(rem % {a.extent}); rem /= {a.extent};")
    g, st, shape, odt = views[k.out]
    if odt != "float32":        # a typed graph output (Cast): the store converts
        g = f"(({CTYPE[odt]} *){g})"
    oidx = [f"({a.name} + {o})" if o else a.name for a, o in zip(sp, k.out_offset)]
    out = f"{g}[{' + '.join(f'(long){i} * {s}' for i, s in zip(oidx, st) if s) or '0'}]"
    def half(x):      # a float16 graph output: the store rounds (cexpr.HALF_HELPERS)
        srcs = {views[b][3] for b in k.buffers if b != k.out and b in views}
        return cexpr.from_float(odt, x, "float64" if srcs == {"float64"} else "float32") if odt == "float16" else x
    if k.combine:
        w(f"float acc = {cexpr.float_literal(k.init)};")
        for a in red:
            w.open(f"for (int {a.name} = 0; {a.name} < {a.extent}; ++{a.name})")
        w(COMBINE[k.combine].format(a="acc", v=cexpr.render(k.body, lambda n: n, load)))
        for _ in red:
            w.close()
        w(f"{out} = {half(cexpr.render(k.epilogue, lambda n: n, load, acc='acc'))};")
    else:
        w(f"{out} = {half(cexpr.render(substitute_acc(k.epilogue, k.body), lambda n: n, load))};")
    w.close()
    return w.lines


# ---- files ----------------------------------------------------------------------------

def launch_wrapper(name, params):
    """The host-callable wrapper of a __mlu_global__ function: a Union1 launch of 16 tasks."""
    return [f'extern "C" void {name}_launch(cnrtQueue_t queue{"".join(f", float *{n}" for n in params)})', "{",
            "    cnrtDim3_t dim = {16, 1, 1};",
            f"    SWB_LAUNCH({name}, dim, cnrtFuncTypeUnion1, queue{', ' if params else ''}{', '.join(params)});", "}", ""]


def kernel_text(dk, P, banks=64, alone=True):
    """A kernel: its own launch (`alone`), or a __mlu_func__ a group launch calls (stitch.py)."""
    args = ", ".join(f"float *{name}" for name, _ in dk.params) or "void"
    head = [f"/* {c_comment(dk.op + (' + ' + ' + '.join(dk.fused) if dk.fused else ''))} (node {c_comment(dk.node)}): "
            f"{dk.cls}{', ' + c_comment(dk.info.get('why', '')) if dk.cls == 'scalar' and dk.info.get('why') else ''} */",
            f"{'__mlu_global__' if alone else '__mlu_func__'} void {dk.name}({args})", "{"]
    if dk.cls == "scalar":
        body = scalar_kernel(dk, P)
    elif dk.cls == "recurrence":
        body = recurrence_body(dk, P)
    else:
        kp = KernelPrinter(dk, P, banks)
        kp.body(dk.body)
        body = kp.w.lines
    return head + body + ["}", ""] + (launch_wrapper(dk.name, [n for n, _ in dk.params]) if alone else [])


def group_text(ln, by_name):
    """A group launch: its kernels in order, a __sync_all between two of them."""
    refs, calls = launch_params(ln, by_name)
    params = [f"a{i}" for i in range(len(refs))]
    out = [f"/* group {ln.group}: {c_comment(' '.join(ln.kernels))} in one launch */",
           f"__mlu_global__ void {ln.name}({', '.join('float *' + p for p in params) or 'void'})", "{"]
    for i, (name, ix) in enumerate(zip(ln.kernels, calls)):
        if i:
            out.append(f"    __sync_all();   /* {name} reads what other cores wrote */")
        out.append(f"    {name}({', '.join(params[j] for j in ix)});")
    return out + ["}", ""] + launch_wrapper(ln.name, params)


def device_file(program, tc, version, dks, arenas):
    P = program.prefix
    out = [f"/* BANG C device code of model {c_comment(program.name)} for {tc.name}: generated by swbuild {version}. Do not edit. */",
           "#include <bang.h>", "#include <cnrt.h>", "#include <math.h>", "",
           "#ifdef __BANGEMU__",
           "#define SWB_LAUNCH(k, dim, type, q, ...) BANGEMU_LAUNCH(k, dim, type, q, __VA_ARGS__)",
           "#else",
           "#define SWB_LAUNCH(k, dim, type, q, ...) k<<<dim, type, q>>>(__VA_ARGS__)",
           "#endif", *SCALAR_MACRO, "", (cexpr.PRELUDE + (cexpr.HALF_HELPERS if cexpr.has_halves(program) else "")).rstrip(), ""]
    quals = {"NRAM": ("__nram__", "nram"), "WRAM": ("__wram__", "wram"), "SRAM": ("__mlu_shared__", "sram")}
    for space, n in arenas.items():
        if n:
            q, s = quals[space]
            out.append(f"{q} char {P}_{s}[{n}];   /* shared by every kernel of the model */")
    out.append("")
    by_name = {dk.name: dk for dk in dks}
    for ln in launches_of(program):
        for name in ln.kernels:
            out += kernel_text(by_name[name], P, int(tc.hardware.get("wram_banks", 64)), alone=not ln.stitched)
        if ln.stitched:
            out += group_text(ln, by_name)
    return "\n".join(out)


def api_args(program, names):
    g = program.graph
    return ([f"const {CTYPE[g.tensors[t].dtype]} *{names[('in', t)]}" for t in program.inputs]
            + [f"{CTYPE[g.tensors[t].dtype]} *{names[('out', t)]}" for t in program.outputs] + ["void *workspace"])


def _bytes(program, t):
    return program.graph.tensors[t].nbytes


def model_header(program, version, names):
    U = program.prefix.upper()
    return common.model_header(program, version, api_args(program, names), [
        "/* run() needs no host scratch memory (device memory is allocated by init()); the",
        "   workspace argument is accepted for the common API and may be NULL. */",
        f"#define {U}_WORKSPACE_SIZE 0",
        f"#define {U}_DEVICE_ARENA_SIZE {program.memory.arena_bytes if program.memory else 0}", ""])


class Image:
    """The device weights image: raw constants and reordered convolution weights, built at
    init from the linked blob (splat constants are filled, not stored)."""

    def __init__(self, program, store):
        self.p, self.store = program, store
        self.blob, self.blob_off = WeightsBlob(64), {}
        self.ops = []
        for key, off, n, spec in store.entries:
            if spec[0] == "raw":
                src = self._src(spec[1])
                self.ops.append(("raw", off, n, src))
            else:
                _, wt, geo = spec
                self.ops.append(("conv", off, n, self._src(wt), geo))
        self.elems = store.elems

    def _src(self, root):
        t = self.p.graph.tensors[root]
        a = t.data
        if (is_splat(a) or a.size == 1) and t.dtype == "float32":
            return ("splat", float(np.asarray(a).reshape(-1)[0]))
        if root not in self.blob_off:
            self.blob_off[root] = self.blob.add(a, t.dtype)
        return ("blob", self.blob_off[root] // 4)


def _reorder_lines(P, banks, ctype, suffix):
    """The host function that writes convolution weights in the WRAM bank layout (`ctype`
    elements: float, or int8_t for __bang_conv's fixed point, the exact integer values)."""
    return ["/* Convolution weights in the WRAM bank layout, block by block (group, output block,",
            f"   input block): filter co of a block sits in bank co % 64; padding channels are 0;",
            "   input channel ci is channel ci % cf of tap row y + ci / cf (cf = Cig but for a stem whose",
            "   kernel height is folded into its channels, schedule/stem.py)"
            + ("" if ctype == "float" else f" ({ctype}: exact integers)") + ". */",
            f"static void {P}_reorder{suffix}({ctype} *dst, const float *src, float splat, int G, int Cog, int Cig, int kh, int kw,",
            "                          int NCB, int NIB, int Cob, int Cib, long sg, long sco, long sci, long sy, long sx, int cf)",
            "{",
            "    const long K = (long)kh * kw * Cib, BS = (long)Cob * K;",
            "    for (int g = 0; g < G; ++g)",
            "        for (int cb = 0; cb < NCB; ++cb)",
            "            for (int ib = 0; ib < NIB; ++ib) {",
            f"                {ctype} *blk = dst + (((long)g * NCB + cb) * NIB + ib) * BS;",
            "                for (int c = 0; c < Cob; ++c) {",
            f"                    const long slot = (long)(c % {banks}) * (Cob / {banks}) + c / {banks};",
            "                    const int co = cb * Cob + c;",
            "                    for (int y = 0; y < kh; ++y)",
            "                        for (int x = 0; x < kw; ++x)",
            "                            for (int i = 0; i < Cib; ++i) {",
            "                                const int ci = ib * Cib + i;",
            "                                float v = 0.0f;",
            "                                if (co < Cog && ci < Cig)",
            "                                    v = src ? src[g * sg + co * sco + (ci % cf) * sci + (y + ci / cf) * sy + x * sx] : splat;",
            f"                                blk[slot * K + (y * kw + x) * Cib + i] = ({ctype})v;",
            "                            }",
            "                }",
            "            }",
            "}"]


def host_file(program, tc, version, dks, image, names):
    P = program.prefix
    hw = tc.hardware
    out = [f"/* Host code of model {c_comment(program.name)} for {tc.name}: generated by swbuild {version}. Do not edit. */",
           "#include <cnrt.h>", "#include <math.h>", "#include <stddef.h>", "#include <stdlib.h>", "#include <string.h>",
           f'#include "{P}.h"', "",
           f'extern "C" const unsigned char {P}_weights[];'] + watchdog.host_definition(P)
    by_name = {dk.name: dk for dk in dks}
    launches = [(ln, launch_params(ln, by_name)[0]) for ln in launches_of(program)]
    for ln, refs in launches:
        out.append(f'extern "C" void {ln.name}_launch(cnrtQueue_t{"".join(", float *" for _ in refs)});')
    out += ["", f"static int {P}_ready;", f"static cnrtQueue_t {P}_queue;", f"static float *{P}_image, *{P}_arena;"]
    for i, _ in enumerate(program.inputs):
        out.append(f"static float *{P}_din{i};")
    for i, _ in enumerate(program.outputs):
        out.append(f"static float *{P}_dout{i};")
    banks = int(hw.get("wram_banks", 64))
    out += [""] + _reorder_lines(P, banks, "float", "")
    if any(op[0] == "conv" and op[4].get("wbytes", 4) == 1 for op in image.ops):
        out += ["#include <stdint.h>", ""] + _reorder_lines(P, banks, "int8_t", "_int8")
    out += [""]
    out += [
            f"int {P}_init(void)", "{", f"    if ({P}_ready) return 0;",
            f"    if (cnrtQueueCreate(&{P}_queue) != cnrtSuccess) return -1;",
            f"    const size_t img = {max(image.elems, 16)}UL;",
            "    float *h = (float *)calloc(img, sizeof(float));",
            "    if (!h) return -1;",
            f"    const float *blob = (const float *){P}_weights;",
            "    (void)blob;"]
    for op in image.ops:
        if op[0] == "raw":
            _, off, n, src = op     # n in 4-byte words
            if src[0] == "splat":
                out.append(f"    for (size_t i = 0; i < {n}UL; ++i) h[{off}UL + i] = {cexpr.float_literal(src[1])};")
            else:
                out.append(f"    memcpy(h + {off}UL, blob + {src[1]}UL, {n}UL * 4);")
        else:
            _, off, n, src, geo = op
            st = geo["st"]
            srcp = "NULL" if src[0] == "splat" else f"blob + {src[1]}UL"
            splat = cexpr.float_literal(src[1]) if src[0] == "splat" else "0.0f"
            dst = f"_int8((int8_t *)(h + {off}UL)" if geo.get("wbytes", 4) == 1 else f"(h + {off}UL"
            out.append(f"    {P}_reorder{dst}, {srcp}, {splat}, {geo['G']}, {geo['Cog']}, {geo['Cig']}, {geo['kh']}, "
                       f"{geo['kw']}, {geo['NCB']}, {geo['NIB']}, {geo['Cob']}, {geo['Cib']}, {st['g']}L, {st['co']}L, "
                       f"{st['ci']}L, {st['y']}L, {st['x']}L, {geo.get('cf', geo['Cig'])});")
    out += [f"    if (cnrtMalloc((void **)&{P}_image, img * sizeof(float)) != cnrtSuccess) return -1;",
            f"    cnrtMemcpy({P}_image, h, img * sizeof(float), cnrtMemcpyHostToDev);",
            "    free(h);",
            f"    if (cnrtMalloc((void **)&{P}_arena, {max(program.memory.arena_bytes, 64)}UL) != cnrtSuccess) return -1;"]
    for i, t in enumerate(program.inputs):
        out.append(f"    if (cnrtMalloc((void **)&{P}_din{i}, {_bytes(program, t)}UL) != cnrtSuccess) return -1;")
    for i, t in enumerate(program.outputs):
        out.append(f"    if (cnrtMalloc((void **)&{P}_dout{i}, {_bytes(program, t)}UL) != cnrtSuccess) return -1;")
    out += [f"    {P}_ready = 1;", "    return 0;", "}", ""]
    args = api_args(program, names)
    out += [f"int {P}_run({', '.join(args)})", "{", "    (void)workspace;", f"    if (!{P}_ready) return -1;"]
    for i, t in enumerate(program.inputs):
        out.append(f"    cnrtMemcpy({P}_din{i}, (void *){names[('in', t)]}, {_bytes(program, t)}UL, cnrtMemcpyHostToDev);")
    opened = None
    for ln, refs in launches:
        first = by_name[ln.kernels[0]]
        loop = first.kernel.loop
        if loop != opened:    # a static loop: its body's kernels launch trips times
            out += common.loop_lines(program, opened, loop, "    ")
            opened = loop
        ptrs = [device_pointer(program, ref, P) for ref in refs]
        what = f"group {ln.group}" if ln.stitched else f"{c_comment(first.op)} {c_comment(first.node)}"
        out.append(watchdog.host_mark(P, ln.name, queue=f"(void *){P}_queue"))
        out.append(f"    {ln.name}_launch({P}_queue{''.join(', ' + p for p in ptrs)});   /* {what} */")
    out += common.loop_lines(program, opened, None, "    ")
    out.append(f"    if (cnrtQueueSync({P}_queue) != cnrtSuccess) return -1;")
    out.append(watchdog.host_mark(P, "", queue=f"(void *){P}_queue"))
    for i, t in enumerate(program.outputs):
        out.append(f"    cnrtMemcpy({names[('out', t)]}, {P}_dout{i}, {_bytes(program, t)}UL, cnrtMemcpyDevToHost);")
    out += ["    return 0;", "}", "", f"void {P}_teardown(void)", "{", f"    if (!{P}_ready) return;",
            f"    cnrtFree({P}_image);", f"    cnrtFree({P}_arena);"]
    for i, _ in enumerate(program.inputs):
        out.append(f"    cnrtFree({P}_din{i});")
    for i, _ in enumerate(program.outputs):
        out.append(f"    cnrtFree({P}_dout{i});")
    out += [f"    cnrtQueueDestroy({P}_queue);", f"    {P}_ready = 0;", "}", ""]
    return "\n".join(out)


def device_pointer(program, ref, P):
    kind, r = ref
    if kind == "image":
        return f"{P}_image + {r}UL"
    sl = program.loop_pointer_offset(r)
    if sl is not None:              # a static loop's slice: iteration sw_it's part of its container
        return f"(float *)((char *){device_pointer(program, ('tensor', program.root(sl[0])), P)} + {sl[1]})"
    slot = program.io_slot(r)
    if slot:
        return f"{P}_d{slot[0]}{slot[1]}"
    return f"(float *)((char *){P}_arena + {program.memory.offsets[r]}UL)"


def weights_asm(program, image):
    return common.weights_asm(program, image.blob)


def runner_file(program, version, clock_hz):
    """The runner (runner_main.py): files in and out, --repeat/--warmup, --times from CNRT notifiers."""
    U = program.prefix.upper()
    ins = tensors(program, "INPUT", U, CTYPE)
    outs = tensors(program, "OUTPUT", U, CTYPE)
    return runner_main(program, version, ins, outs, "notifier", clock_hz, ["NULL"], [])
