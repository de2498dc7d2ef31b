"""The tile search's table (ldm.py): every spatial tile shape whose accumulator fits (the
product of the axes' candidate sizes) times every size of one reduce axis, the other reduce
axes whole. Every reduce axis takes its turn as the tiled one: a convolution's input channels
are not always the axis to tile (a 7x7 stem with 3 input channels tiles `ci`, not the window).

Rows that do not fit the LDM are dropped. Each remaining row gets a lower bound of its
objective (the model with no compute cycles), and rows are costed in full in the order of
their bounds, as far as a row could still win: a few dozen of a few thousand, typically. All of
it is numpy (batch.py: box shapes, LDM sizes, DMA shapes, vector plans, modelled times, bit for
bit the scalar model's); only the rows the search keeps (the best, and those near it for the
traffic pick) become Search.evaluate results.
"""
from __future__ import annotations

import numpy as np

from ..cost import model
from . import batch

FIRST = 48          # rows costed at first (then twice as many each time) while some may still win:
                    # a chunk's numpy calls cost ~1 ms, a row a few us, and searches end after 34
                    # rows on average (light_inception_v1), so most take one chunk


class Table:
    """The rows of one search (columns T: axis -> sizes, in table order) with a lower bound
    of each row's objective; rows are costed (batch.spatial_table, batch.evaluate_table) in
    the order of their bounds, as far as a row could still win."""

    def __init__(self, s, T, n, st, lb):
        self.s, self.T, self.n, self.st, self.lb = s, T, n, st, lb
        self.obj = np.full(n, np.inf)
        self.rows = {}                   # row -> (spatial columns, evaluation columns, index in them)
        self._order = None
        self.pos = 0                     # order[:pos] are costed

    def first(self, m):
        """The first m rows in the order of their bounds, ties in table order: the stable
        argsort's first m, from a partial sort (a search costs a few dozen of thousands of
        rows; a split trial may only ask for the least bound and sorts nothing)."""
        m = min(m, self.n)
        have = 0 if self._order is None else len(self._order)
        if m == 0:
            return np.zeros(0, np.int64)
        if have < m:
            want = min(self.n, max(m, 2 * have, 4 * FIRST))
            thr = np.partition(self.lb, want - 1)[want - 1] if want < self.n else np.nan
            if np.isnan(thr):           # all of them (or a NaN bound, which sorts last)
                self._order = np.argsort(self.lb, kind="stable")
            else:
                below = np.nonzero(self.lb < thr)[0]
                ties = np.nonzero(self.lb == thr)[0][:want - len(below)]
                rows = np.sort(np.concatenate((below, ties)))   # in table order (np.unique loads numpy.ma)
                self._order = rows[np.argsort(self.lb[rows], kind="stable")]
        return self._order[:m]

    @property
    def costed(self):
        """Whether each row has been costed."""
        out = np.zeros(self.n, bool)
        out[self.first(self.pos)] = True
        return out

    def cost(self, bound):
        """Cost, in the order of their bounds and in chunks that double, every row whose
        bound is at most `bound`; with None, every row whose bound is below the best objective
        costed so far."""
        size = FIRST
        while self.pos < self.n:
            limit = bound if bound is not None else self.obj.min(initial=np.inf)
            idx = self.first(self.pos + size)[self.pos:]
            idx = idx[self.lb[idx] < limit] if bound is None else idx[self.lb[idx] <= limit]   # a prefix
            if len(idx) == 0:
                break
            self.pos += len(idx)
            size *= 2
            s, m = self.s, len(idx)
            T = {a: c[idx] for a, c in self.T.items()}
            st = {b: tuple(x[idx] for x in v) for b, v in self.st.items()}
            sp = batch.spatial_table(s, T, m)
            ev = batch.evaluate_table(s, T, m, st, sp)
            self.obj[idx] = np.where(ev["fits"], ev["obj"], np.inf)
            for j, i in enumerate(idx.tolist()):
                self.rows[i] = (sp, ev, j)

    def key(self, i):
        return tuple(int(self.T[a.name][i]) for a in self.s.axes)

    def record(self, i):
        """Row i (costed) as Search.evaluate's result, entered in the search's cache and
        vector-plan memo as evaluating its tiles would; returns its key."""
        s, key = self.s, self.key(i)
        if key not in s.cache:
            sp, ev, j = self.rows[i]
            p = int(sp["pid"][j])
            vp = sp["plans"][p] if p >= 0 else None
            s._vp[key] = (vp, float(sp["base"][j]), float(sp["full"][j]), float(sp["zero"][j]),
                          int(sp["oby"][j]), float(sp["put"][j]))
            s.cache[key] = batch.result(ev, j, vp)
        return key

    def best(self):
        """(tiles, objective) of the row of least objective (the first in table order among
        equals); a row not costed has a bound, so an objective, no better."""
        self.cost(None)
        i = int(np.argmin(self.obj))
        return dict(zip([a.name for a in self.s.axes], self.record(i))), float(self.obj[i])

    def record_within(self, bound):
        """Record every row whose objective is at most `bound`, in table order."""
        self.cost(bound)
        for i in np.nonzero(self.obj <= bound)[0].tolist():
            self.record(i)


def rows(s, cands):
    """The table's tilings before the LDM check: (T: axis -> int64 column, row count, where:
    each spatial axis -> the index of its size in cands, and "variant" -> the index of the
    row's reduce sizes in `variants`; variants)."""
    k = s.k
    sp = [a.name for a in k.axes]
    grids = np.meshgrid(*[np.arange(len(cands[n])) for n in sp], indexing="ij")
    where = {n: g.reshape(-1) for n, g in zip(sp, grids)}
    size = np.ones(len(where[sp[0]]) if sp else 1, np.int64)
    for n in sp:
        size = size * np.array(cands[n], np.int64)[where[n]]
    keep = size * s.E <= s.budget * 0.9          # the accumulator leaves room for the inputs
    whole = tuple(a.extent for a in k.reduce_axes)
    variants = [whole] + [whole[:i] + (c,) + whole[i + 1:] for i, a in enumerate(k.reduce_axes)
                          for c in cands[a.name] if c < a.extent]
    v = len(variants)
    where = {n: np.repeat(w[keep], v) for n, w in where.items()}
    m = int(keep.sum())
    where["variant"] = np.tile(np.arange(v), m)
    T = {n: np.array(cands[n], np.int64)[where[n]] for n in sp}
    var = np.array(variants, np.int64).reshape(v, len(whole))
    for i, a in enumerate(k.reduce_axes):
        T[a.name] = var[where["variant"], i]
    return T, m * v, where, variants


def statics(s, cands, where, variants, n):
    """batch.statics of the table, and each box's DMA seconds per fetch as a fifth column:
    they depend on the box's own axes' sizes alone, so they are costed once per combination of
    those (a small grid) and gathered per row."""
    k = s.k
    out = {}
    for b in s.boxes:
        if b.context == "out":
            continue
        vs = s._vset[id(b)]
        sv = [a.name for a in k.axes if a.name in vs]
        rv = [i for i, a in enumerate(k.reduce_axes) if a.name in vs]
        proj = {}                                # the variants as this box sees them
        of_variant = np.array([proj.setdefault(tuple(x[i] for i in rv), len(proj)) for x in variants], np.int64)
        p = len(proj)
        grids = np.meshgrid(*[np.arange(len(cands[x])) for x in sv], indexing="ij")
        g = int(np.prod([len(cands[x]) for x in sv])) if sv else 1
        G = {x: np.repeat(np.array(cands[x], np.int64)[gr.reshape(-1)], p) for x, gr in zip(sv, grids)}
        pv = np.array(list(proj), np.int64).reshape(p, len(rv))
        for j, i in enumerate(rv):
            G[k.reduce_axes[i].name] = np.tile(pv[:, j], g)
        grid = batch.box_static(s, b, G, g * p)
        grid += (batch.dma_seconds(s.hw, grid[2], grid[3]),)        # the box's DMA seconds per fetch
        at = np.zeros(n, np.int64)
        for x in sv:
            at = at * len(cands[x]) + where[x]
        at = at * p + of_variant[where["variant"]]
        out[id(b)] = tuple(c[at] for c in grid)
    return out


def enumerate_tiles(s, cands):
    """The table of `s`'s kernel (rows that fit the LDM only), or None when no row fits."""
    T, n, where, variants = rows(s, cands)
    if n == 0:
        return None
    st = statics(s, cands, where, variants, n)
    keep = np.nonzero(batch.ldm(s, T, n, st, False) <= s.budget)[0]
    if len(keep) == 0:
        return None
    T = {a: c[keep] for a, c in T.items()}
    st = {b: tuple(x[keep] for x in v) for b, v in st.items()}
    n = len(keep)
    return Table(s, T, n, st, lower_bounds(s, T, n, st, keep // len(variants)))


def lower_bounds(s, T, n, st, shape=None):
    """Each row's objective with no compute cycles (DMA, syncs and pad expansion only): no
    more than its objective, which grows with the cycles when dma_overlap <= 1 (0 otherwise).
    `shape`: each row's spatial tile shape as a number, non-decreasing (the table's rows are
    grouped by it), when known: the output's put is costed once per shape."""
    if float(model.hwget(s.hw, "dma_overlap")) > 1.0:
        return np.zeros(n)
    if shape is None:
        shape = np.arange(n)
    new = np.ones(n, bool)
    new[1:] = shape[1:] != shape[:-1]
    first, which = np.flatnonzero(new), np.cumsum(new) - 1
    oby, ochunk = batch.out_static(s, {a: c[first] for a, c in T.items()}, len(first))
    put = batch.dma_seconds(s.hw, oby, ochunk)
    none = np.zeros(n)
    fix = {"base": none, "full": none, "zero": none, "oby": oby[which], "put": put[which]}
    return batch.evaluate_table(s, T, n, st, fix, fits=np.ones(n, bool), objective_only=True)["obj"]   # all fit
