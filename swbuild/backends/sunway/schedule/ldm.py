"""LDM management (swTVM Algorithm 1): the tile search that fits a kernel's buffers into each
CPE's local memory (`Search`, `search_tiles`), used by the pass `choose_tiles` (passes.py).

Iterators are classified as in swTVM: an axis that indexes some LDM buffer is a *size*
iterator (its tile size sets buffer sizes), one cut into several tiles is also a *num*
iterator (its tile loop sets how many DMAs run), one that indexes no buffer is a *comp*
iterator (compute only).

Sizing, per kernel: one table of tilings (enumerate_tiles.py: every spatial tile shape whose
accumulator fits times every size of one reduce axis), costed at once in the order of a lower
bound of each row's objective, as far as a row can still win; the best row wins, and among the
rows within TIME_SLACK of it the one moving the fewest bytes. When no row fits (several reduce
axes must be tiled), swTVM's greedy sizing: every size iterator starts at 64 elements (or its
extent when smaller; tile sizes are powers of two, the extent, or the extent halved evenly);
while the buffers exceed the budget, halve the tile whose halving frees the most LDM; then take
the single-tile growth that lowers the modelled time the most while the buffers fit, until
nothing improves. If all tiles are 1 and it still does not fit, `LdmError` says how many bytes
it needs.

The objective is the cost model of `cost/model.py` on the busiest CPE: DMA time from
the box transfer sizes (bandwidth by contiguous chunk, shared by the CPEs), compute time of
the inner loops that will be generated (SIMD/register blocked or scalar, `simd.py`),
overlapped when the boxes are double-buffered (which doubles their LDM), and the number of
tiles each CPE processes. The budget is the toolchain's LDM minus its reserve.

Costing is batched (batch.py, enumerate_tiles.py: numpy over a table of tilings, bit-exact
with the scalar `Search` methods, so a tiling costs the same either way).

The passes after the search (passes.py) choose double buffering and row sharing, re-lay out
constant boxes in blocks (dma.py), reorder the loops (reorder.py), lay out the LDM into the
kernel's `Schedule` and choose the CPE partition.
"""
from __future__ import annotations

import math

from ....support.errors import LdmError
from ....config.recipe import option_on
from ..cost import model
from . import batch, cache, reorder, simd
from .dma import blockable, box_plans
from .enumerate_tiles import enumerate_tiles
from .grid import ROW, column_axes, spatial_tiles
from .kernel_schedule import ldm_align

START = 64          # Algorithm 1: buffers start at 64 elements per iterator
FORM_WIDTH = {None: 1, "row": ROW, "col": ROW, "array": ROW * ROW}   # CPEs a 2-D sharing form feeds


def ldm_budget(target, options):
    """Bytes of LDM a kernel's buffers may use per CPE: the target's, or the recipe's reserve."""
    if options.get("ldm_reserve") not in (None, "auto"):
        return int(target.hardware["ldm_bytes"]) - int(options["ldm_reserve"])
    return target.ldm_budget


def candidates(extent):
    """Tile sizes tried for an axis: powers of two, the extent, the extent halved evenly."""
    extent = max(extent, 1)
    c = {extent}
    p = 1
    while p < extent:
        c.add(p)
        p *= 2
    d = 2
    while d <= extent:
        c.add(-(-extent // d))
        d *= 2
    return sorted(c)


class Search:
    """The modelled time of a kernel for tile sizes, and its LDM use (cached)."""

    def __init__(self, kernel, hw, budget, options, graph=None, toolchain_hash=""):
        self.k, self.hw, self.budget = kernel, hw, budget
        self.E = kernel.elem_bytes      # bytes per element of the accumulator and output tile
        self.toolchain_hash = toolchain_hash     # keys the persistent schedule cache
        self.cores = int(hw["cpes"])
        self.boxes = box_plans(kernel)
        self.EB = {id(b): kernel.buf_bytes(b.buf) for b in self.boxes}     # per box: its tensor's element
        self.graph = graph
        self.db_ok = option_on(options, "double_buffer")
        self.simd_ok = option_on(options, "simd")
        self.traffic_weight = float(options.get("traffic_weight") or 0.0)
        # SW26010: broadcast DMA; SW26010-Pro: one CPE's DMA, then an RMA broadcast (its cost: self.rma)
        self.rma = model.rma_share(hw)
        self.share_ok = (bool(model.hwget(hw, "row_broadcast") or self.rma) and int(hw["cpes"]) % ROW == 0
                         and option_on(options, "row_share"))
        # CPEs one broadcast may feed: a mesh row; all of them too with array broadcast (RMA has both)
        array = model.hwget(hw, "array_broadcast") or self.rma
        self.widths = ((ROW,) + ((self.cores,) if array and self.cores > ROW else ())
                       if self.share_ok else ())
        # 2-D sharing (grid.py): rows along one axis, columns along the rest; RMA has the
        # column broadcast (CRTS_rma_col_ibcast), SW26010's broadcast DMA has none
        self.cols_ok = bool(self.rma) and self.share_ok and self.cores == ROW * ROW
        self.quick = options.get("search_effort") == "quick"
        self.axes = list(kernel.axes) + list(kernel.reduce_axes)
        self.ext = {a.name: a.extent for a in self.axes}
        self.can_block = {id(b): graph is not None and blockable(b, kernel, graph) is not None for b in self.boxes}
        users = {}
        for b in self.boxes:
            users[b.buf] = users.get(b.buf, 0) + 1
        for b in self.boxes:
            if users[b.buf] != 1 or b.epi_host:
                self.can_block[id(b)] = False
        # reduce axes a box serving the epilogue needs whole (dma.host_epilogue_loads)
        self.keep_whole = frozenset().union(*(b.keep_whole for b in self.boxes))
        self.cache = {}
        self.red_points = math.prod(a.extent for a in kernel.reduce_axes)
        self._bs, self._vp, self._ldm, self._secs = {}, {}, {}, {}
        self._vset = {id(b): b.vars for b in self.boxes}      # BoxPlan.vars rebuilds the set
        self._bvars = {id(b): sorted(v) for b, v in zip(self.boxes, self._vset.values())}

    def box_static(self, b, tiles):
        """(LDM elements per half, DMA calls, bytes, contiguous chunk bytes) of one fetch."""
        key = (id(b),) + tuple(tiles[v] for v in self._bvars[id(b)])
        r = self._bs.get(key)
        if r is None:
            r = self._bs[key] = self._box_static(b, tiles)
        return r

    def _box_static(self, b, tiles):
        m = b.merge_dim(tiles)
        if self.can_block[id(b)] and m > 1:
            blocks = [tiles[next(iter(b.dim_vars(d)))] if b.dim_vars(d) else 1 for d in range(len(b.shape))]
            n = math.prod(blocks)
            E = self.EB[id(b)]
            return n, 1, n * E, n * E
        span = b.span(tiles)
        ext = [min(e, s) for e, s in zip(span, b.shape)]
        cap = math.prod(span)
        if m == 0:
            n = math.prod(b.shape) * self.EB[id(b)]
            return cap, 1, n, n
        c = m - 1
        inner = math.prod(b.shape[m:])
        run = ext[c] * inner * self.EB[id(b)]
        if c == 0:
            return cap, 1, run, run
        calls = math.prod(ext[:c - 1])
        contiguous = ext[c] == b.shape[c] or ext[c - 1] == 1
        return cap, calls, calls * ext[c - 1] * run, (ext[c - 1] * run if contiguous else run)

    def ldm(self, tiles, db, key=None):
        key = (db,) + (tuple(tiles[a.name] for a in self.axes) if key is None else key)
        r = self._ldm.get(key)
        if r is None:
            r = self._ldm[key] = self._ldm_bytes(tiles, db)
        return r

    def _ldm_bytes(self, tiles, db):
        acc = 1
        for a in self.k.axes:
            acc *= tiles[a.name]
        tot = ldm_align(acc * self.E)
        ext = self.ext
        for b in self.boxes:
            if b.context == "out":
                continue
            cap = self.box_static(b, tiles)[0]
            two = db and any(tiles[v] < ext[v] for v in self._bvars[id(b)])
            tot += ldm_align(cap * self.EB[id(b)]) * (2 if two else 1)
            if b.stage is not None:       # the intermediate its stage computes: one buffer
                tot += ldm_align(b.stage.box.cap(tiles) * self.EB[id(b)])
        return tot

    def fetch_cycles(self, b, tiles, cap):
        """simd.fetch_cycles of one fetch of box b at these tiles."""
        return simd.fetch_cycles(self.hw, b, cap, b.stage.box.cap(tiles) if b.stage is not None else 0)

    def moves(self, b, tiles):
        """The box's footprint changes during a CPE's run (so a second half helps)."""
        return any(tiles[v] < self.ext[v] for v in b.vars)

    def evaluate(self, tiles, key=None):
        """(modelled seconds, double-buffered, vector plan) or None when it does not fit.
        `key`: the tiles as a tuple in axis order, when the caller has it."""
        if key is None:
            key = tuple(tiles[a.name] for a in self.axes)
        res = self.cache.get(key, self)
        if res is self:
            res = self.cache[key] = self._evaluate(tiles, key)
        return res

    def lanes(self, tiles):
        """(axis, width): spatial axes the 8 CPEs of a row (width 8) or all CPEs (width 64,
        array broadcast) can split while broadcasting the boxes that do not depend on them
        (schedule/grid.py): a tile count that is a multiple of the width."""
        out = []
        for a in self.k.axes:
            n = math.ceil(a.extent / tiles[a.name])
            if any(b.context != "out" and a.name not in self._vset[id(b)] for b in self.boxes):
                out += [(a.name, w) for w in self.widths if n % w == 0]
        if self.cols_ok:    # (axis, 8, 8): 2-D sharing, where some box is shared along columns
            out += [(a.name, ROW, ROW) for a in self.k.axes if self.mesh_forms(tiles, a.name) is not None]
        return out

    def mesh_forms(self, tiles, axis):
        """2-D sharing with `axis` split along the mesh rows (grid.column_axes): per input box
        id, how it is shared ("row", "col", "array", or None: fetched by every CPE); None when
        the lane's tile count is no multiple of 8, the rows are not in lockstep, or no box is
        shared along columns (plain row sharing)."""
        names = [a.name for a in self.k.axes]
        counts = [math.ceil(self.ext[x] / tiles[x]) for x in names]
        if counts[names.index(axis)] % ROW:
            return None
        same = column_axes(counts, names.index(axis))
        if same is None:
            return None
        same = {names[p] for p in same}
        spatial = set(names)
        out = {}
        for b in self.boxes:
            if b.context == "out":
                continue
            v = self._vset[id(b)]
            col = (v & spatial) <= same
            out[id(b)] = ("array" if col else "row") if axis not in v else ("col" if col else None)
        return out if any(f in ("col", "array") for f in out.values()) else None

    def candidates(self):
        """Tile sizes tried per axis: `candidates`, the axes in keep_whole at their extent only."""
        return {a.name: [a.extent] if a.name in self.keep_whole else candidates(a.extent) for a in self.axes}

    def _evaluate(self, tiles, key=None):
        """The best of: no sharing, and row or array sharing over each lane axis."""
        if key is None:
            key = tuple(tiles[a.name] for a in self.axes)
        if self.ldm(tiles, False, key) > self.budget or any(tiles[n] < self.ext[n] for n in self.keep_whole):
            return None
        k = self.k
        sp = self._vp.get(key)
        if sp is None:
            sp = self._vp[key] = self._spatial(tiles)
        tiled_r = reorder.tiled_reduce_axes(k, tiles)
        order = tiled_r if len(tiled_r) <= 1 else reorder.order_reduce(k, self.boxes, tiles)[0]
        rcounts = reorder.reduce_counts(k, tiles)
        ntiles = spatial_tiles(k, tiles)
        # per input box, what every lane shares: its fetch shape and the reduce loop it sits in
        boxes = [(b, self.box_static(b, tiles), reorder.box_level(b, order)) for b in self.boxes
                 if b.context != "out"]
        common = (sp, order, rcounts, math.prod(rcounts[n] for n in order),
                  {a.name for a in k.axes if tiles[a.name] < a.extent}, set(order), ntiles,
                  math.ceil(ntiles / self.cores), self.db_ok and self.ldm(tiles, True, key) <= self.budget, boxes)
        best = None
        for lane in [None] + self.lanes(tiles):
            r = self._evaluate_lane(tiles, lane, common)
            if best is None or self.objective(r) < self.objective(best):
                best = r
        return best

    def _dma_seconds(self, by, chunk):
        r = self._secs.get((by, chunk))
        if r is None:
            r = self._secs[(by, chunk)] = model.dma_seconds_per_cpe(self.hw, by, chunk)
        return r

    def _evaluate_lane(self, tiles, lane, common):
        """One lane's modelled time; `common`: what all lanes share (_evaluate). `lane`:
        (axis, width) or None."""
        k, hw = self.k, self.hw
        axis, width = (lane or (None, 1))[:2]
        forms = self.mesh_forms(tiles, axis) if lane is not None and len(lane) == 3 else None
        sp, order, rcounts, nsteps, split, tiled, ntiles, waves, db_fits, boxes = common
        vp, base_cyc, step_full, step_zero, oby, put = sp
        dma_tile = dma_once = dma_shared = first = 0.0
        bytes_tile = bytes_once = 0
        expand = 0.0
        syncs_tile = syncs_once = 0.0
        rma_tile = rma_once = 0.0       # RMA broadcast cycles of a member (SW26010-Pro)
        for b, (cap, calls, by, chunk), lv in boxes:
            secs = self._dma_seconds(by, chunk)
            first += secs
            if forms is not None:       # 2-D: its own width (a row, a column, all 64, none)
                wb = FORM_WIDTH[forms[id(b)]]
            else:
                wb = width if lane is not None and axis not in self._vset[id(b)] else 1
            shared = wb > 1
            rc = model.rma_cycles(self.rma, by) if shared and self.rma else 0.0
            if shared:
                # one broadcast feeds the row (array): read once for `width` CPEs; its fetches
                # are dealt in turn, so the busiest CPE issues ceil(fetches / width) of them
                # (below), and row (array) barriers go around each fetch
                by = by / wb
            if b.context == "body" and k.combine is not None and (self._vset[id(b)] & tiled):
                n = math.prod(rcounts[x] for x in order[:lv + 1])
                if shared:
                    dma_shared += model.ceil_div(waves * n, wb) * secs
                else:
                    dma_tile += n * secs
                bytes_tile += n * by
                syncs_tile += n * shared
                rma_tile += n * rc
                ex = self.fetch_cycles(b, tiles, cap)
                if ex is not None:
                    expand += n * ex
            elif self._vset[id(b)] & split:
                if shared:
                    dma_shared += model.ceil_div(waves, wb) * secs
                else:
                    dma_tile += secs
                bytes_tile += by
                syncs_tile += shared
                rma_tile += rc
                ex = self.fetch_cycles(b, tiles, cap)
                if ex is not None:
                    expand += ex
            else:
                if shared:
                    dma_shared += secs
                else:
                    dma_once += secs
                bytes_once += by
                syncs_once += shared
                rma_once += rc
        dma_tile += put
        bytes_tile += oby
        cyc = base_cyc + expand
        if k.combine is not None:
            cyc += step_full
            cyc += (nsteps - 1) * step_zero
        comp_tile = cyc / model.clock(hw)
        D, C = waves * dma_tile + dma_once + dma_shared, waves * comp_tile
        # 2-D sharing meets as an array (rows and columns both broadcast)
        sync = (waves * syncs_tile + syncs_once) * model.sync_cycles(hw, width if forms is None else self.cores) \
            / model.clock(hw)
        rma = (waves * rma_tile + rma_once) / model.clock(hw)
        serial = float(model.cpe_seconds(hw, D, C + 2 * sync + rma, 0.0, False))
        traffic = ntiles * bytes_tile + min(ntiles, self.cores) * bytes_once
        best = (serial, False, vp, traffic, lane)
        if db_fits:
            over = float(model.cpe_seconds(hw, D, C + sync + rma, min(D, first + put), True))
            if over < serial:
                best = (over, True, vp, traffic, lane)
        return best

    def _spatial(self, tiles):
        """The vector plan (from the whole tiling: the reduce tile counts), init + epilogue
        cycles, the cycles of a reduce step (the first, with all reduce points, and a later
        one), the output's bytes and put seconds."""
        k, hw = self.k, self.hw
        vp = simd.plan(k, tiles, hw, self.simd_ok)
        ext = [tiles[a.name] for a in k.axes]
        _, _, oby, ochunk = self._out_static(self.boxes[-1], tiles, ext)
        put = model.dma_seconds_per_cpe(hw, oby, ochunk)
        pext = {a.name: tiles[a.name] for a in k.axes}
        points = math.prod(ext)
        base = simd.init_cycles(k, hw, points) + simd.epilogue_cycles(k, hw, points)
        full = zero = 0.0
        if k.combine is not None:
            full = simd.step_cycles(k, vp, hw, pext, self.red_points)
            zero = simd.step_cycles(k, vp, hw, pext, 0)
        return vp, base, full, zero, oby, put

    def _out_static(self, ob, tiles, ext):
        m = ob.merge_dim(tiles)
        inner = math.prod(ob.shape[m:]) if m else math.prod(ob.shape)
        if m == 0:
            n = math.prod(ob.shape) * self.E
            return 1, 1, n, n
        c = m - 1
        run = ext[c] * inner * self.E
        if c == 0:
            return 1, 1, run, run
        calls = math.prod(ext[:c - 1])
        return 1, calls, calls * ext[c - 1] * run, run

    def objective(self, r):
        """The search objective of an evaluation: modelled seconds, plus `traffic_weight`
        seconds per byte of main-memory traffic (0 by default: pure time)."""
        return r[0] + self.traffic_weight * r[3]

    def cost(self, tiles):
        r = self.evaluate(tiles)
        return math.inf if r is None else self.objective(r)


def _costs(s, trials):
    """s.cost of each trial, in order (costed at once, batch.py)."""
    return [math.inf if r is None else s.objective(r) for r in batch.evaluate_many(s, trials)]


def _shrink_to_fit(s, tiles, cands):
    while s.ldm(tiles, False) > s.budget:
        trials = []
        for a in s.axes:
            i = cands[a.name].index(tiles[a.name])
            if i == 0:
                continue
            trial = dict(tiles)
            trial[a.name] = cands[a.name][i - 1]
            trials.append(trial)
        best = None
        for trial, c in zip(trials, _costs(s, trials)):
            key = (s.ldm(trial, False), c)
            if best is None or key < best[0]:
                best = (key, trial)
        if best is None:
            raise LdmError(s.k.name, s.ldm(tiles, False), s.budget)
        tiles = best[1]
    return tiles


def _better(s, trials, cur):
    """The cheapest trial that improves on `cur`, as (cost, tiles), or None."""
    best = None
    for trial, c in zip(trials, _costs(s, trials)):
        if c < cur * (1 - 1e-9) and (best is None or c < best[0]):
            best = (c, trial)
    return best


def _expand(s, tiles, cands):
    cur = s.cost(tiles)
    while True:
        trials = []
        for a in s.axes:
            cs = cands[a.name]
            i = cs.index(tiles[a.name])
            moves = set(cs[i + 1:i + 3])
            if i > 0:
                moves.add(cs[i - 1])
            for nt in moves:
                trial = dict(tiles)
                trial[a.name] = nt
                trials.append(trial)
        best = _better(s, trials, cur)
        # pairwise: shrink one axis, grow another (escapes LDM-bound plateaus)
        if best is None and not s.quick:
            trials = []
            for a in s.axes:
                ia = cands[a.name].index(tiles[a.name])
                if ia == 0:
                    continue
                for b2 in s.axes:
                    if b2 is a:
                        continue
                    ib = cands[b2.name].index(tiles[b2.name])
                    for nb in cands[b2.name][ib + 1:ib + 3]:
                        trial = dict(tiles)
                        trial[a.name] = cands[a.name][ia - 1]
                        trial[b2.name] = nb
                        trials.append(trial)
            best = _better(s, trials, cur)
        if best is None:
            return tiles, cur
        cur, tiles = best


TIME_SLACK = 0.01          # modelled time given up, at most, for less main-memory traffic


_MEMO = {}


def signature(s):
    """The canonical form of a search: kernels that differ only in names (repeated layers)
    get the same tiles, in this process (_MEMO) and across builds (cache.py)."""
    k = s.k
    g = s.graph

    def buf(n, b):
        t = g.tensors.get(b.tensor) if g is not None else None
        return (n, tuple(b.shape), t is not None and t.data is not None, getattr(t, "dtype", None))
    bufs = tuple(sorted(buf(n, b) for n, b in k.buffers.items()))
    return (tuple((a.name, a.extent) for a in k.axes), tuple((a.name, a.extent) for a in k.reduce_axes),
            str(k.body), str(k.epilogue), k.combine, k.init, tuple(k.out_offset), k.out, bufs,
            tuple(st.key for st in k.stages),
            repr(sorted(s.hw.items())), s.budget, s.db_ok, s.simd_ok, s.share_ok, s.traffic_weight, s.quick)


_COSTED = {}     # signature -> (tiles as a key, Search.evaluate of them): a repeated layer's is not recomputed


def known_tiles(s):
    """The tiles of `s`'s kernel from this process's memo or the persistent cache (a hit is
    memoised), or None: what search_tiles returns without searching. The tiles' evaluation,
    when this process made it for a kernel of the same signature, enters `s`'s cache."""
    sig = signature(s)
    if sig not in _MEMO:
        stored = cache.load(cache.entry_key(sig, s.toolchain_hash))
        if stored is None or sorted(a for a, _ in stored) != sorted(s.ext):
            return None
        _MEMO[sig] = dict(stored)
    if sig in _COSTED:
        key, r = _COSTED[sig]
        s.cache.setdefault(key, r)
    return dict(_MEMO[sig])


def search_seconds(s):
    """About how long `s`'s search takes (enumerate_tiles: a few ms per table, ~1 us per row;
    rows counted before the accumulator and LDM checks), for deciding whether to fork."""
    spatial = math.prod(len(candidates(a.extent)) for a in s.k.axes)
    return 3e-3 + 1e-6 * spatial * (1 + sum(len(candidates(a.extent)) - 1 for a in s.k.reduce_axes))


def pending_seconds(searches):
    """About how long the searches whose tiles are not known yet take: a trial's work."""
    return sum(search_seconds(s) for s in searches if known_tiles(s) is None)


def search_tiles(s):
    """The chosen tiles of `s`'s kernel: from this process's memo, the persistent cache, or
    the search (then remembered in both)."""
    tiles = known_tiles(s)
    if tiles is None:
        sig = signature(s)
        tiles = _search_tiles(s)
        cache.store(cache.entry_key(sig, s.toolchain_hash), list(tiles.items()))
        _MEMO[sig] = dict(tiles)
        key = tuple(tiles[a.name] for a in s.axes)
        if key in s.cache:
            _COSTED[sig] = (key, s.cache[key])
    return tiles


def floor_seconds(s):
    """At most the modelled seconds of whatever tiles search_tiles(s) returns: the least lower
    bound of the search's table (enumerate_tiles), which is then kept for the search; 0.0 when
    the tiles are already known (no table is built for them), there is no table, or the
    objective adds traffic (its bounds are the objective's)."""
    if s.traffic_weight or known_tiles(s) is not None:
        return 0.0
    table = _table(s)
    return 0.0 if table is None or table.n == 0 else float(table.lb.min())


def _table(s):
    """The search's table, built once (floor_seconds may ask before the search does)."""
    if not hasattr(s, "_tile_table"):
        s._tile_table = enumerate_tiles(s, s.candidates())
    return s._tile_table


def _search_tiles(s):
    cands = s.candidates()
    ones = {a.name: 1 for a in s.axes}
    if s.ldm(ones, False) > s.budget:
        raise LdmError(s.k.name, s.ldm(ones, False), s.budget)
    table = _table(s)
    del s._tile_table                   # the Search outlives its search (passes.Draft): not its table
    if table is not None:
        best, cost = table.best()
        table.record_within(cost * (1 + TIME_SLACK))
    else:       # no row of the table fits (several reduce axes must be tiled): shrink from 64, grow
        start = {a.name: max(c for c in cands[a.name] if c <= START) for a in s.axes}
        best, cost = _expand(s, _shrink_to_fit(s, start, cands), cands)
    # among the evaluated tilings within TIME_SLACK of the best objective, the least traffic
    pick = None
    for key, r in s.cache.items():
        if r is None:
            continue
        c = s.objective(r)
        if c <= cost * (1 + TIME_SLACK) and (pick is None or (r[3], c) < pick[0]):
            pick = ((r[3], c), key)
    if pick is not None:
        best = dict(zip([a.name for a in s.axes], pick[1]))
    return best
