"""CPE (slave) C for one scheduled kernel.

Shape of every kernel (swTVM's layout, with double buffering):

    DMA the parameter struct into LDM; this CPE's share of the tile grid (schedule/grid.py)
    allocate LDM: the accumulator tile, each box (two halves when double-buffered)
    for each step s = (tile, reduce tile) of this CPE:
        flip double-buffered boxes whose next footprint was prefetched
        prefetch step s+1: every double-buffered box whose footprint changes
        fetch single-buffered boxes whose footprint changes (and wait)
        wait for this step's boxes; materialise pads of freshly fetched boxes
        first step of a tile: wait for the previous tile's output DMA, initialise acc
        compute (SIMD register-blocked micro-kernel or scalar), guard free
        last step of a tile: epilogue, non-blocking DMA of the output tile

With row sharing (schedule/grid.py) a box that does not depend on the row's lane axis has the
same footprint on all 8 CPEs of a mesh row at every step. The whole row records it and
counts the box's fetches; the CPE in column (k % 8) broadcasts the k-th fetch (athread_get
BCAST_MODE, mask 1 << row; the fetches are dealt evenly) and waits for it, and the row meets
in athread_syn(ROW_SCOPE): once per step that fetches or consumes a double-buffered broadcast
(the data has landed, and the half the next broadcast refills is no longer read), around a
single-buffered one, and once after allocation. Array sharing is the same over all 64 CPEs:
CPE (k % 64) broadcasts the k-th fetch to every row (mask 0xff) and the array meets in
athread_syn(ARRAY_SCOPE).

DMA is non-blocking with one reply word per buffer half. A box is fetched exactly when its
footprint differs from the resident one, so each DMA sits at the outermost loop where the
footprint changes (swTVM). `cost/predict.py: simulate` replays the same decisions and
arithmetic at compile time; the emulator's counters must equal it.
"""
from __future__ import annotations

import math

from ....ir.loopnest import affine, iter_loads
from ....support.names import c_comment
from ...cexpr import INT_LIMITS, Writer, ctype_of, float_literal, int_literal
from .slave_file import EXPAND_SUFFIX
from ..kinds.convert import convert_c
from ..kinds.gather import gather_c
from ..kinds.mesh_chain_c import mesh_chain_c
from ..kinds.mesh_gemm_c import mesh_gemm_c
from ..kinds.recurrence import recurrence_c
from ..schedule.dma import block_grid
from ..schedule.grid import ROW, group_counts
from ..schedule.kernel_schedule import ldm_align
from .slave_compute import epilogue, scalar_reduce, vector_compute
from .slave_stage import stage_c, stage_setup, stage_state
from .slave_dma import box_dma as _dma, call as _call, horner as _horner, issuer, nonempty, rma_share

SPECIAL_PRINTERS = {"gather": gather_c, "convert": convert_c, "recurrence": recurrence_c, "mesh": mesh_gemm_c,
                    "mesh_chain": mesh_chain_c}   # kernel kind -> fn(k, cores, itemsize) -> C text

class _K:
    """Names and facts of one kernel being printed."""

    def __init__(self, k, cores, rma=False):
        self.k, self.s, self.cores = k, k.schedule, cores
        self.rma = rma      # shared boxes reach the row (array) by DMA + RMA broadcast (SW26010-Pro)
        self.t = self.s.tiles
        self.ext = {a.name: a.extent for a in list(k.axes) + list(k.reduce_axes)}
        self.sp = [a.name for a in k.axes]
        self.red = [a.name for a in k.reduce_axes]
        self.boxes = [b for b in self.s.boxes if b.context != "out"]
        self.out = next(b for b in self.s.boxes if b.context == "out")
        self.key = {}
        self.box = {b.name: b for b in self.boxes}
        for b in self.boxes:
            if b.stage is not None:     # the consumer's loads read the stage's intermediate
                self.key[(b.stage.stage.buf, b.context, b.stage.pad)] = b.stage.box
            elif b.feeds is None:       # a constant a stage reads is no load's box
                self.key[(b.buf, b.context, b.pad)] = b
        self.rcounts = [math.ceil(self.ext[n] / self.t[n]) for n in self.s.red_order]
        self.nsteps = math.prod(self.rcounts)
        # the barrier of the CPEs a broadcast feeds: a mesh row, or the whole array
        self.sync = "SW_ROW_SYNC" if self.s.share_width == ROW and not self.s.cols else "SW_ARRAY_SYNC"

    def box_of(self, ld, ctx):
        b = self.key.get((ld.buf, ctx, ld.pad))
        if b is None:
            b = self.key.get((ld.buf, ctx, None))
        if b is None:   # a pad load that never falls outside shares the plain box
            b = next((x for x in self.key.values() if x.buf == ld.buf and x.context == ctx), None)
        if b is None and ctx == "epi":      # read from the body box holding its whole window
            b = next(x for x in self.key.values() if x.buf == ld.buf and x.epi_host)
            cut = sorted(n for n in b.keep_whole if self.t[n] < self.ext[n])
            if cut:
                raise ValueError(f"kernel {self.k.name}: the epilogue reads {ld.buf} from box {b.name}, "
                                 f"but its reduce axes {cut} are tiled")
        return b


def _init(k):
    """The accumulator's first value in the kernel's own type (an integer max starts at the
    type's least value, not at -inf)."""
    lim = INT_LIMITS.get(k.out_dtype)
    if lim is None:
        return float_literal(k.init, k.elem_bytes == 8)
    if k.init in (float("inf"), float("-inf")):
        return lim[1] if k.init > 0 else lim[0]
    return int_literal(k.init)


def kernel_c(k, cores, itemsize=4, rma=False):
    """One kernel's C. `rma`: the API shares boxes by DMA + RMA broadcast (cpe_api.CpeApi.rma)."""
    if k.kind != "compute":
        return SPECIAL_PRINTERS[k.kind](k, cores, itemsize)
    K = _K(k, cores, rma)
    s, t = K.s, K.t
    itemsize, ft, dbl = k.elem_bytes, ctype_of(k), k.elem_bytes == 8     # double: a float64 kernel
    pf = {b.name for b in K.boxes if b.name in s.prefetched}
    linked = bool(pf) or s.hook        # called by its launch with prefetch state (prefetch.py)
    w = Writer()
    head = [f"/* {c_comment(k.op + (' + ' + ' + '.join(k.fused) if k.fused else ''))} (node {c_comment(k.node)}) */",
            f"/* {c_comment(str(s))} */"]
    if pf:
        head = _prefetch_c(K, itemsize) + head
    head += [f"static void {k.name}_in(void *arg, void *pf_, const struct sw_next *nx)" if linked
             else f"void {k.name}(void *arg)", "{"]
    if linked:
        w(f"struct {k.name}_pf *pf = (struct {k.name}_pf *)pf_;" if pf else "(void)pf_;")
        if not s.hook:
            w("(void)nx;")
    hook = "if (nx) nx->fn(nx->arg, nx->st);   /* the next kernel's prefetch */"
    w(f"struct {k.name}_para p;")
    w("SW_REPLY rp = 0;")
    w("sw_get(&p, arg, (int)sizeof(p), 0, 0, &rp);")
    w("SW_WAIT(rp, 1);")
    if K.rma and any(b.shared for b in K.boxes):
        w("SW_RMA_RESET();")
    counts, gstep = _deal(w, K, cores, hook if s.hook else None)
    acc_n = math.prod(t[n] for n in K.sp)
    allocs = [("acc", ldm_align(acc_n * itemsize), ft)]       # each box in its tensor's element type
    for b in K.boxes:
        allocs.append((f"X_{b.name}", ldm_align(b.cap(t) * k.buf_bytes(b.buf)) * b.halves, ctype_of(k, b.buf)))
        if b.stage is not None:
            allocs.append((f"Y_{b.name}", ldm_align(b.stage.box.cap(t) * k.buf_bytes(b.buf)), ctype_of(k, b.buf)))
    for name, n, ty in allocs:
        if name[2:] in pf and name.startswith("X_"):
            w(f"{ty} *{name} = pf ? pf->{name} : ({ty} *)ldm_malloc({n});")
        else:
            w(f"{ty} *{name} = ({ty} *)ldm_malloc({n});")
    for b in K.boxes:
        nd = max(len(b.shape), 1)
        rs = K.rma and b.shared
        if b.name in pf:
            _state_of_prefetched(w, b.name, nd, rs)
        else:
            if rs:      # per half: a broadcast is due (every member), this CPE issues it, its bytes
                w(f"int pb_{b.name}[2] = {{0, 0}}, bi_{b.name}[2] = {{0, 0}}, bl_{b.name}[2] = {{0, 0}};")
            w(f"SW_REPLY rp_{b.name}[2] = {{0, 0}};")
            w(f"int ng_{b.name}[2] = {{0, 0}}, val_{b.name}[2] = {{0, 0}}, fresh_{b.name}[2] = {{0, 0}};")
            w(f"int lo_{b.name}[2][{nd}], hi_{b.name}[2][{nd}];")
            w(f"int cur_{b.name} = {1 if b.halves == 2 else 0}, pend_{b.name} = 0;")
        if b.shared:
            first = f"pf ? pf->nb_{b.name} : 0" if b.name in pf else "0"
            w(f"int nb_{b.name} = {first};   /* broadcasts of this box so far: the next issuer */")
        if b.pad_dims:
            w(f"static const int shape_{b.name}[{len(b.shape)}] = {{{', '.join(map(str, b.shape))}}};")
        if b.stage is not None:
            stage_state(w, b)
    w("SW_REPLY rp_out = 0;")
    w("int ng_out = 0;")
    _step_vars(w, K)
    w(f"const long S = my_n * {K.nsteps}L;")
    w("int rstep = 0;")
    db = [b for b in K.boxes if b.halves == 2]
    single = [b for b in K.boxes if b.halves == 1]
    shared_db = [b for b in db if b.shared]
    if shared_db:
        w(f"{K.sync}();   /* the whole row (array) has allocated its buffers before the first broadcast */")
    if db:
        w("/* prologue: fetch the first step's double-buffered boxes */")
        _decode(w, K, "0", "NT", counts, gstep, None)
        for b in db:
            if b.name in pf:        # the previous kernel of the launch issued it
                w.open("if (!pf)")
                _prefetch(w, K, b, "NT", itemsize)
                w.close()
            else:
                _prefetch(w, K, b, "NT", itemsize)
    if s.hook:
        w(hook)
    w.open("for (long s = 0; s < S; s++)")
    _decode(w, K, "s", "T", counts, gstep, "rstep")
    if shared_db:
        w(f"int sync = {' || '.join(f'pend_{b.name}' for b in shared_db)};")
    for b in db:
        w(f"if (pend_{b.name}) {{ cur_{b.name} ^= 1; pend_{b.name} = 0; }}")
    if db:
        w.open("if (s + 1 < S)")
        _decode(w, K, "s + 1", "NT", counts, gstep, None)
        w.close()
    if shared_db:
        # the row meets once a step around broadcasts: this step's data has landed (its
        # issuer waited first) and nobody still reads the half the next broadcast refills
        for b in shared_db:
            w(f"SW_WAIT(rp_{b.name}[cur_{b.name}], ng_{b.name}[cur_{b.name}]);")
            if K.rma:
                rma_share(w, K, b, f"cur_{b.name}")
            w.open("if (s + 1 < S)")
            _new_fp(w, K, b, "NT", f"cur_{b.name}")
            w("sync = 1;")
            w.close()
            w.close()
        w(f"if (sync) {K.sync}();")
    if db:
        w.open("if (s + 1 < S)")
        for b in db:
            _prefetch(w, K, b, "NT", itemsize)
        w.close()
    for b in single:
        _fetch_single(w, K, b, itemsize)
    for b in K.boxes:
        c = f"cur_{b.name}"
        w(f"SW_WAIT(rp_{b.name}[{c}], ng_{b.name}[{c}]);")
        if b.pad_dims:
            w(f"if (fresh_{b.name}[{c}]) {{ sw_expand{EXPAND_SUFFIX[ctype_of(k, b.buf)]}(X_{b.name} + {c} * {b.cap(t)}, {len(b.shape)}, "
              f"lo_{b.name}[{c}], hi_{b.name}[{c}], shape_{b.name}, {float_literal(b.pad, dbl)}); fresh_{b.name}[{c}] = 0; }}")
    for b in K.boxes:
        if b.stage is not None:
            stage_c(w, K, b, *_fp(K, b.stage.box, "T"))
    _step_setup(w, K)
    w.open("if (rstep == 0)")
    w("SW_WAIT(rp_out, ng_out);")
    if k.combine:
        w(f"for (int i = 0; i < {' * '.join(f'TN_{n}' for n in K.sp) or '1'}; i++) acc[i] = {_init(k)};")
    w.close()
    if k.combine:
        if s.vector is not None:
            vector_compute(w, K)
        else:
            scalar_reduce(w, K)
    w.open(f"if (rstep == {K.nsteps - 1})")
    epilogue(w, K)
    _put_out(w, K, itemsize)
    w.close()
    w.close()
    w("SW_WAIT(rp_out, ng_out);")
    for name, n, _ in reversed(allocs):
        if name[2:] in pf and name.startswith("X_"):
            w(f"if (!pf) ldm_free({name}, {n});   /* else the launch frees it */")
        else:
            w(f"ldm_free({name}, {n});")
    tail = ["}", ""]
    if linked:      # the kernel alone (a launch of its own)
        tail += [f"void {k.name}(void *arg)", "{", f"    {k.name}_in(arg, 0, 0);", "}", ""]
    return "\n".join(head + w.lines + tail)


def _deal(w, K, cores, hook=None):
    """This CPE's share of the tile grid: g0, my_n (and row, col under sharing); a CPE with
    no tiles returns (after the statement `hook`, if any). Returns (grid counts, grid step)."""
    s = K.s
    w("const int cpe = SW_CPE_ID();")
    counts = [math.ceil(K.ext[n] / K.t[n]) for n in s.grid_order]
    if s.lane:      # row (array) sharing: units of `width` CPEs take groups, CPE c of a unit the
        # lane tiles l*width + c (schedule/grid.py); `row` is the unit, `col` the CPE in it
        W = s.share_width
        counts = group_counts(counts, s.grid_order.index(s.lane), W)
        w(f"const int row = cpe / {W}, col = cpe % {W};")
        w(f"const int bmask = {'1 << row' if W == ROW else hex((1 << (cores // ROW)) - 1)};   /* rows a broadcast feeds */")
        w("(void)bmask;")
        who, units = "row", cores // W
    else:
        who, units = "cpe", cores
    total = math.prod(counts)
    if s.partition == "block":
        q, r = divmod(total, units)
        w(f"const long g0 = (long){who} * {q} + ({who} < {r} ? {who} : {r});")
        w(f"const long my_n = {q} + ({who} < {r} ? 1 : 0);")
        gstep = 1
    else:
        w(f"const long g0 = {who};")
        w(f"const long my_n = {who} < {total} ? ({total}L - {who} + {units - 1}) / {units} : 0;")
        gstep = units
    w(f"if (my_n <= 0) {{ {hook} return; }}" if hook else "if (my_n <= 0) return;")
    return counts, gstep


def _step_vars(w, K, prefixes=("T", "NT")):
    """The current (T) and next (NT) step's tile origins and extents per axis."""
    for n in K.sp + K.s.red_order:
        w(f"int {', '.join(f'{P}0_{n} = 0, {P}N_{n} = 0' for P in prefixes)};")
    for n in K.red:
        if n not in K.s.red_order:
            w(f"const int {', '.join(f'{P}0_{n} = 0, {P}N_{n} = {K.ext[n]}' for P in prefixes)};")


def _state_of_prefetched(w, n, nd, rma=False):
    """A prefetched box's reply words, counters and resident footprints: the launch's (in the
    prefetch state) when called with one, else the kernel's own."""
    if rma:
        w(f"int own_pb_{n}[2] = {{0, 0}}, own_bi_{n}[2] = {{0, 0}}, own_bl_{n}[2] = {{0, 0}};")
        src = lambda x: f"pf ? pf->{x} : own_{x}"
        w(f"int *pb_{n} = {src(f'pb_{n}')}, *bi_{n} = {src(f'bi_{n}')}, *bl_{n} = {src(f'bl_{n}')};")
    w(f"SW_REPLY own_rp_{n}[2] = {{0, 0}};")
    w(f"int own_ng_{n}[2] = {{0, 0}}, own_val_{n}[2] = {{0, 0}}, own_fresh_{n}[2] = {{0, 0}};")
    w(f"int own_lo_{n}[2][{nd}], own_hi_{n}[2][{nd}];")
    _state_pointers(w, n, nd, lambda x: f"pf ? pf->{x} : own_{x}")
    w(f"int cur_{n} = 1, pend_{n} = pf ? pf->pend_{n} : 0;")


def _state_pointers(w, n, nd, src):
    """Box n's state names (rp_, ng_, val_, fresh_, lo_, hi_) pointing at `src(field)`."""
    w(f"SW_REPLY *rp_{n} = {src(f'rp_{n}')};")
    w(f"int *ng_{n} = {src(f'ng_{n}')}, *val_{n} = {src(f'val_{n}')};")
    w(f"int *fresh_{n} = {src(f'fresh_{n}')};")
    w(f"int (*lo_{n})[{nd}] = {src(f'lo_{n}')}, (*hi_{n})[{nd}] = {src(f'hi_{n}')};")


def _prefetch_c(K, itemsize):
    """The prefetch state of a target kernel and the function that fills it: the previous
    kernel of the launch calls it (through struct sw_next) once its own first fetches are
    under way. It reads the parameter struct, deals the grid as the kernel will, and issues
    the first step's fetch of the prefetched boxes exactly as the kernel's prologue would (a
    broadcast box: the whole row records it, the CPE in column 0 issues it, and the kernel
    goes on counting broadcasts from the state)."""
    k = K.k
    pf = [b for b in K.boxes if b.name in K.s.prefetched]
    st = [f"struct {k.name}_pf {{", f"    struct {k.name}_para p;"]
    for b in pf:
        nd = max(len(b.shape), 1)
        n = b.name
        st += [f"    float *X_{n};", f"    SW_REPLY rp_{n}[2];",
               f"    int ng_{n}[2], val_{n}[2], fresh_{n}[2], lo_{n}[2][{nd}], hi_{n}[2][{nd}], pend_{n};"]
        if b.shared:
            st.append(f"    int nb_{n};   /* broadcasts issued so far */")
        if b.shared and K.rma:
            st.append(f"    int pb_{n}[2], bi_{n}[2], bl_{n}[2];   /* RMA broadcast due, issued here, its bytes */")
    st += ["};"]
    w = Writer()
    w(f"struct {k.name}_pf *f = (struct {k.name}_pf *)state;")
    w("SW_REPLY rp = 0;")
    w("sw_get(&f->p, arg, (int)sizeof(f->p), 0, 0, &rp);")
    w("SW_WAIT(rp, 1);")
    w(f"const struct {k.name}_para p = f->p;")
    for b in pf:
        n = b.name
        w(f"f->rp_{n}[0] = f->rp_{n}[1] = 0;")
        w(f"f->ng_{n}[0] = f->ng_{n}[1] = f->val_{n}[0] = f->val_{n}[1] = f->fresh_{n}[0] = f->fresh_{n}[1] = 0;")
        w(f"f->pend_{n} = 0;")
        if b.shared:
            w(f"f->nb_{n} = 0;")
        if b.shared and K.rma:
            w(f"f->pb_{n}[0] = f->pb_{n}[1] = f->bi_{n}[0] = f->bi_{n}[1] = f->bl_{n}[0] = f->bl_{n}[1] = 0;")
    counts, gstep = _deal(w, K, K.cores)
    for b in pf:
        n, nd = b.name, max(len(b.shape), 1)
        w(f"float *X_{n} = f->X_{n};")
        _state_pointers(w, n, nd, lambda x: f"f->{x}")
        if b.shared and K.rma:
            w(f"int *pb_{n} = f->pb_{n}, *bi_{n} = f->bi_{n}, *bl_{n} = f->bl_{n};")
        w(f"int cur_{n} = 1, pend_{n} = 0;")
        if b.shared:
            w(f"int nb_{n} = 0;")
    _step_vars(w, K, ("NT",))
    _decode(w, K, "0", "NT", counts, gstep, None)
    for b in pf:
        _prefetch(w, K, b, "NT", itemsize)
        w(f"f->pend_{b.name} = pend_{b.name};")
        if b.shared:
            w(f"f->nb_{b.name} = nb_{b.name};")
    w("(void)p;")
    return st + ["", f"/* {k.name}'s first fetch of {', '.join(b.name for b in pf)}: issued by the previous kernel of its launch */",
                 f"static void {k.name}_prefetch(void *arg, void *state)", "{"] + w.lines + ["}", ""]


def _decode(w, K, sexpr, P, counts, gstep, rvar):
    """Coordinates of step `sexpr` into P0_<axis> / PN_<axis>."""
    t, s = K.t, K.s
    w("{")
    w.depth += 1
    w(f"const long st = {sexpr};")
    w(f"long g = g0 + (st / {K.nsteps}) * {gstep};")
    w(f"int rr = (int)(st % {K.nsteps});")
    if rvar:
        w(f"{rvar} = rr;")
    for n, c in reversed(list(zip(s.grid_order, counts))):
        tile = f"((int)(g % {c}) * {s.share_width} + col)" if n == s.lane else f"(int)(g % {c})"
        w(f"{P}0_{n} = {tile} * {t[n]}; g /= {c}; {P}N_{n} = SW_MIN({t[n]}, {K.ext[n]} - {P}0_{n});")
    for n, c in reversed(list(zip(s.red_order, K.rcounts))):
        w(f"{P}0_{n} = (rr % {c}) * {t[n]}; rr /= {c}; {P}N_{n} = SW_MIN({t[n]}, {K.ext[n]} - {P}0_{n});")
    w("(void)g; (void)rr;")
    w.depth -= 1
    w("}")


def _fp(K, b, P):
    """C text of the unclamped footprint (lo, hi) per dim of box b at coordinates P."""
    los, his = [], []
    for d, affs in enumerate(b.index):
        lo_t, hi_t = [], []
        for aff in affs:
            lo, hi = [str(aff.get(None, 0))], [str(aff.get(None, 0))]
            for v, c in sorted((v, c) for v, c in aff.items() if v):
                start, last = f"{P}0_{v}", f"({P}0_{v} + {P}N_{v} - 1)"
                lo.append(f"{c} * {start if c > 0 else last}")
                hi.append(f"{c} * {last if c > 0 else start}")
            lo_t.append(" + ".join(lo))
            hi_t.append(" + ".join(hi))
        lo, hi = lo_t[0], hi_t[0]
        for x in lo_t[1:]:
            lo = f"SW_MIN({lo}, {x})"
        for x in hi_t[1:]:
            hi = f"SW_MAX({hi}, {x})"
        if b.blocked is not None:
            if d in b.wide:             # the block holding the tile (dma.BoxPlan.footprint)
                lo = f"({lo}) / {b.blocked[d]} * {b.blocked[d]}"
            hi = f"{lo} + {b.blocked[d] - 1}"
        los.append(lo)
        his.append(hi)
    return los, his


def _new_fp(w, K, b, P, half):
    """Compare the footprint at P with the resident one of `half`; open an `if` when it changed."""
    los, his = _fp(K, b, P)
    nd = len(b.shape)
    for d in range(nd):
        w(f"const int flo{d} = {los[d]}, fhi{d} = {his[d]};")
    diff = [f"!val_{b.name}[{half}]"] + [f"flo{d} != lo_{b.name}[{half}][{d}] || fhi{d} != hi_{b.name}[{half}][{d}]"
                                         for d in range(nd)]
    w.open(f"if ({' || '.join(diff)})")


def _prefetch(w, K, b, P, itemsize):
    w("{")
    w.depth += 1
    _new_fp(w, K, b, P, f"cur_{b.name}")
    w(f"const int h = cur_{b.name} ^ 1;")
    _issue(w, K, b, "h", itemsize)
    w(f"pend_{b.name} = 1;")
    w.close()
    w.depth -= 1
    w("}")


def _fetch_single(w, K, b, itemsize):
    w("{")
    w.depth += 1
    _new_fp(w, K, b, "T", "0")
    w("const int h = 0;")
    if b.shared:         # the row meets before (the old contents are done with) and after
        w(f"{K.sync}();")
        _issue(w, K, b, "h", itemsize)
        w(f"SW_WAIT(rp_{b.name}[0], ng_{b.name}[0]);")
        if K.rma:
            rma_share(w, K, b, "0")
        w(f"{K.sync}();")
    else:
        _issue(w, K, b, "h", itemsize)
    w.close()
    w.depth -= 1
    w("}")


def _issue(w, K, b, h, itemsize):
    itemsize = K.k.buf_bytes(b.buf)     # the box's own element size
    """Record the new footprint in half h and issue its DMA (flo*/fhi* are in scope). A
    shared box is recorded by the whole row (array), which counts its fetches in lockstep,
    and the k-th fetch is broadcast by the CPE at k % width in it (an even deal)."""
    nd = len(b.shape)
    n = b.name
    w(f"val_{n}[{h}] = 1;")
    for d in range(nd):
        w(f"lo_{n}[{h}][{d}] = flo{d}; hi_{n}[{h}][{d}] = fhi{d};")
    if b.pad_dims:
        w(f"fresh_{n}[{h}] = {' || '.join(f'flo{d} < 0 || fhi{d} > {b.shape[d] - 1}' for d in b.pad_dims)};")
    if b.shared and K.rma:
        # the issuer only DMAs here; it broadcasts when the row (array) consumes the half
        # (_rma_share), and every member waits for one landing if the footprint is not empty
        w(f"pb_{n}[{h}] = {nonempty(b)};")
        w.open(f"if ({issuer(K, b)})")
        w("sw_blen = 0;")
        _transfer(w, K, b, h, itemsize)
        w(f"bi_{n}[{h}] = 1; bl_{n}[{h}] = sw_blen;")
        w.close()
    elif b.shared:
        w.open(f"if ({issuer(K, b)})")
        _transfer(w, K, b, h, itemsize)
        w.close()
    else:
        _transfer(w, K, b, h, itemsize)


def _transfer(w, K, b, h, itemsize):
    itemsize = K.k.buf_bytes(b.buf)
    nd = len(b.shape)
    n = b.name
    dst = f"X_{n} + {h} * {b.cap(K.t)}"
    get = "bget" if b.shared else "get"
    if b.blocked is not None:
        grid = block_grid(b)
        idx = _horner([(f"(flo{d} / {b.blocked[d]})", str(grid[d])) for d in range(nd)])
        nel = math.prod(b.blocked)
        w(_call(get, dst, f"p.{b.buf} + (long)({idx}) * {nel}", str(nel * itemsize), "0", "0", f"rp_{n}[{h}]"))
        w(f"ng_{n}[{h}]++;")
        return
    if nd == 0:
        w(_call(get, dst, f"p.{b.buf}", str(itemsize), "0", "0", f"rp_{n}[{h}]"))
        w(f"ng_{n}[{h}]++;")
        return
    for d in range(nd):
        w(f"const int clo{d} = SW_MAX(flo{d}, 0), cex{d} = SW_MIN(fhi{d}, {b.shape[d] - 1}) - clo{d} + 1;")
    conds = [f"cex{d} > 0" for d in range(nd)]
    _dma(w, b, conds, get, dst, f"p.{b.buf}", [f"cex{d}" for d in range(nd)], [f"clo{d}" for d in range(nd)],
         f"rp_{n}[{h}]", f"ng_{n}[{h}]", itemsize)


# -- compute ---------------------------------------------------------------------------

def _loads(K):
    """Distinct (context, Load) pairs of the kernel, in order, with ids."""
    k = K.k
    out = []
    if k.combine:
        parts = [("body", k.body), ("epi", k.epilogue)]
    else:
        parts = [("epi", k.body), ("epi", k.epilogue)]
    for ctx, e in parts:
        for ld in iter_loads(e):
            if (ctx, ld) not in out:
                out.append((ctx, ld))
    return out


def _step_setup(w, K):
    """Per step: LDM origins and pitches of the current halves, each load's base offset and
    per-axis strides, the accumulator's strides."""
    t = K.t
    for b in K.boxes:
        n, nd = b.name, len(b.shape)
        if b.stage is not None:        # only its stage reads the fetched box
            stage_setup(w, K, b)
            continue
        if b.feeds is not None:
            continue
        w(f"const {ctype_of(K.k, b.buf)} *B_{n} = X_{n} + cur_{n} * {b.cap(t)};")
        if b.blocked is not None:
            ext = [str(x) for x in b.blocked]
        else:
            ext = [f"(hi_{n}[cur_{n}][{d}] - lo_{n}[cur_{n}][{d}] + 1)" for d in range(nd)]
        for d in range(nd):
            tail = ext[d + 1:]
            w(f"const long P_{n}_{d} = {' * '.join(tail) if tail else '1'};")
            w(f"const int O_{n}_{d} = lo_{n}[cur_{n}][{d}];")
    K.ids = {}
    for i, (ctx, ld) in enumerate(_loads(K)):
        b = K.box_of(ld, ctx)
        base, strides = [], {}
        for d, e in enumerate(ld.index):
            aff = affine(e)
            terms = [str(aff.get(None, 0))] + [f"{c} * T0_{v}" for v, c in sorted((v, c) for v, c in aff.items() if v)]
            base.append(f"(long)({' + '.join(terms)} - O_{b.name}_{d}) * P_{b.name}_{d}")
            for v, c in aff.items():
                if v:
                    strides.setdefault(v, []).append(f"{c} * P_{b.name}_{d}")
        w(f"const long o{i} = {' + '.join(base) or '0'};")
        for v, ts in sorted(strides.items()):
            w(f"const long s{i}_{v} = {' + '.join(ts)};")
        K.ids[(ctx, ld)] = (i, b, set(strides))
    sp = K.sp
    for j, n in enumerate(sp):
        tail = [f"TN_{x}" for x in sp[j + 1:]]
        w(f"const long sa_{n} = {' * '.join(tail) if tail else '1'};")
    w("(void)sa_" + sp[0] + ";" if sp else "")


def _put_out(w, K, itemsize):
    k, b = K.k, K.out
    ext = [f"TN_{n}" for n in K.sp]
    lo = [f"(T0_{a.name} + {o})" if o else f"T0_{a.name}" for a, o in zip(k.axes, k.out_offset)]
    _dma(w, b, [], "put", "acc", f"p.{b.buf}", ext, lo, "rp_out", "ng_out", itemsize)
