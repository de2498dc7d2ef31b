"""Building one device kernel: its buffers, parameters and statement ids (KB), the
program-wide constant image (Store), and the task and loop helpers every kernel class uses."""
from __future__ import annotations

from dataclasses import replace

from ....ir.loopnest import Bin, Load, Var, affine, iconst
from ..devir import DBuf, DevKernel, For, const, simp, subst
from ....ir.sizes import round_up
from ...blob import Contents
from ..concat_slices import storage_shape
from ..layout import view_strides
from ..preprocess import vector_elems


ALIGN = 64


class Unschedulable(Exception):
    """The kernel goes to the scalar class."""


class Store:
    """Program-wide GDRAM placement of constants: the device weights image. A key names a
    constant's root second; constants of equal shape and bytes share one placement."""

    def __init__(self, graph):
        self.g = graph
        self.entries = []          # (key, offset elems, nelems, spec)
        self.by_key = {}
        self.elems = 0
        self.contents, self.canon = Contents(), {}

    def canonical(self, root):
        """The first constant root added with the same dtype, shape and bytes as `root`."""
        if root not in self.canon:
            t = self.g.tensors[root]
            self.canon[root] = self.contents.find_or_add(t.data, t.dtype, root, tag=tuple(t.shape)) or root
        return self.canon[root]

    def add(self, key, nelems, spec):
        key = (key[0], self.canonical(key[1])) + tuple(key[2:])
        if key not in self.by_key:
            off = self.elems
            self.entries.append((key, off, nelems, spec))
            self.by_key[key] = off
            self.elems = round_up(off + max(nelems, 1), 16)
        return self.by_key[key]


class KB:
    """Buffers, parameters and statement ids of one device kernel under construction."""

    def __init__(self, k, program, tc, layouts, store):
        self.k, self.p, self.tc, self.hw = k, program, tc, tc.hardware
        self.layouts, self.store = layouts, store
        self.g = program.graph
        self.bufs, self.params, self.sids = {}, [], {}
        self.top = {"NRAM": 0, "WRAM": 0, "SRAM": 0}

    # GDRAM: one pointer argument per storage (tensor root or weights-image region)
    def gparam(self, tensor):
        r = self.p.root(tensor)
        t = self.g.tensors[r]
        if t.data is not None:
            key = ("raw", r)     # in 4-byte words: an int64 constant takes two
            off = self.store.add(key, t.nbytes // 4, ("raw", r))
            ref = ("image", off)
        else:
            ref = ("tensor", r)
        name = self._param(ref, t.size, r)
        if r in self.narrow():      # an int8 activation stored as bytes (schedule/narrow.py)
            self.bufs[name] = replace(self.bufs[name], ctype="int8_t", elem_bytes=1)
        return name

    def narrow(self):
        """Tensors (roots) this program stores as int8 in GDRAM (schedule/narrow.py)."""
        return getattr(self.p.target_state, "int8_storage", None) or frozenset()

    def image(self, key, nelems, spec, label):
        off = self.store.add(key, nelems, spec)
        return self._param(("image", off), nelems, label)

    def _param(self, ref, size, label):
        for name, r in self.params:
            if r == ref:
                return name
        name = f"g{len(self.params)}"
        self.params.append((name, ref))
        self.bufs[name] = DBuf(name, "GDRAM", size, tensor=label)
        return name

    def alloc(self, space, name, elems, layout=(), ctype="float", elem_bytes=4):
        elems = round_up(max(elems, 1), vector_elems(self.hw) * 4 // elem_bytes)
        off = self.top[space]
        self.bufs[name] = DBuf(name, space, elems, off, layout, ctype=ctype, elem_bytes=elem_bytes)
        self.top[space] = round_up(off + elems * elem_bytes, ALIGN)
        return name

    def view(self, name, of, ctype, elem_bytes, layout=()):
        """Another element type over the bytes of on-chip buffer `of` (copies move float
        words, __bang_conv reads the int8 values packed in them)."""
        b = self.bufs[of]
        self.bufs[name] = DBuf(name, b.space, b.elems * b.elem_bytes // elem_bytes, b.offset, layout,
                               ctype=ctype, elem_bytes=elem_bytes)
        return name

    def gstrides(self, b):
        """Element strides of kernel buffer b's view of its tensor's GDRAM storage (None: incompatible)."""
        return view_strides(b.shape, self.g.tensors[b.tensor].shape, self.layouts.get(b.tensor),
                            storage_shape(getattr(self.p.target_state, "storage_shapes", None), self.p, b.tensor))

    def sid(self, kind, label):
        s = f"{label}{len(self.sids)}"
        self.sids[s] = kind
        return s

    def offset(self, load, env=None):
        """GDRAM element offset of a kernel Load (its buffer's view of the tensor's storage)."""
        b = self.k.buffers[load.buf]
        st = self.gstrides(b)
        if st is None:
            raise Unschedulable(f"view {b.shape} of {b.tensor} is incompatible with its layout")
        e = iconst(0)
        for ix, s in zip(load.index, st):
            if affine(ix) is None:
                raise Unschedulable(f"index {ix} is not affine")
            e = Bin("+", e, Bin("*", ix, iconst(s)))
        return simp(subst(e, env or {}))

    def out_offset(self, env=None):
        b = self.k.buffers[self.k.out]
        idx = [Var(a.name) if not o else Var(a.name) + o for a, o in zip(self.k.axes, self.k.out_offset)]
        return self.offset(Load(b.name, tuple(idx)), env)

    def strides(self, bufname):
        b = self.k.buffers[bufname]
        st = self.gstrides(b)
        if st is None:
            raise Unschedulable("incompatible view")
        return st

    def nram_budget(self):
        return self.tc.nram_budget

    def finish(self, cls, body, **info):
        k = self.k
        dk = DevKernel(k.name, k.op, k.node, tuple(k.fused), cls, list(self.params), dict(self.bufs), body,
                       dict(self.sids), flops=k.flops(), kernel=k)
        dk.info.update(info)
        dk.info["nram_bytes"], dk.info["wram_bytes"], dk.info["sram_bytes"] = (self.top["NRAM"], self.top["WRAM"],
                                                                                 self.top["SRAM"])
        return dk


def tasks(body_fn):
    """The cluster and core loops (task id = 4 * cluster + core)."""
    t = Bin("+", Bin("*", Var("tc"), iconst(4)), Var("tk"))
    return [For("tc", iconst(0), iconst(4), [For("tk", iconst(0), iconst(4), body_fn(t), "core")], "cluster")]


def loop(var, ext, body_fn):
    """A serial loop; one iteration is substituted instead."""
    if ext == 1:
        return body_fn(iconst(0))
    return [For(var, iconst(0), iconst(ext), body_fn(Var(var)))]


def ge(e):
    """The guard `e >= 0`, simplified (None when it always holds for constants)."""
    e = simp(e)
    c = const(e)
    if c is not None and c >= 0:
        return None
    return e


def guards(*cs):
    return tuple(c for c in cs if c is not None)
