"""The weights blob as a list of (offset, array) pieces: written straight to its file, never held as bytes.

vgg16's weights are 550 MB; a bytearray copy of them next to the graph's arrays doubled generation memory."""
from __future__ import annotations

import hashlib

import numpy as np


CHUNK = 1 << 24     # bytes of a strided piece copied out at once


def _parts(a):
    """Sub-arrays along the leading axes, each at most CHUNK bytes (or one row), in order."""
    if a.nbytes <= CHUNK or a.ndim <= 1:
        yield a
        return
    for row in a:
        yield from _parts(row)


def _bytes_of(a, dt):
    """The little-endian bytes of `a` as `dt`, in contiguous parts of at most CHUNK bytes."""
    for part in _parts(a):
        yield np.ascontiguousarray(part, dtype=dt).reshape(-1).view(np.uint8)


def _same_bytes(a, b, dt):
    if a.shape == b.shape:
        return all(np.array_equal(x, y) for x, y in zip(_bytes_of(a, dt), _bytes_of(b, dt)))
    return np.array_equal(np.concatenate(list(_bytes_of(a, dt))), np.concatenate(list(_bytes_of(b, dt))))


def _digest(a, dt):
    h = hashlib.blake2b(digest_size=16)
    for part in _bytes_of(a, dt):
        h.update(memoryview(part))
    return h.digest()


class Contents:
    """Which arrays have the same bytes: a constant used by many kernels is often re-laid out,
    or folded, once per use (ALBERT's one shared layer, applied 12 times, became 12 copies of
    every blocked weight: 9.7 GB of main memory for an 0.8 GB model). Only arrays of a size
    already seen are hashed; a hash match is confirmed byte for byte."""

    def __init__(self):
        self.by_size = {}       # (tag, dtype, bytes) -> [[array, digest or None, value]]

    def find_or_add(self, array, dtype, value, tag=None):
        """The value stored with an array of the same bytes as `array` (as `dtype`) and the same
        `tag`, else None after remembering `value` for it."""
        dt = np.dtype(dtype).newbyteorder("<")
        a = np.asarray(array)
        same = self.by_size.setdefault((tag, dt.str, a.size * dt.itemsize), [])
        if same:
            d = _digest(a, dt)
            for e in same:
                if e[1] is None:
                    e[1] = _digest(e[0], dt)
                if e[1] == d and _same_bytes(e[0], a, dt):
                    return e[2]
            same.append([a, d, value])
        else:
            same.append([a, None, value])
        return None


class WeightsBlob:
    """Aligned little-endian tensors laid end to end; `len()` and offsets are known before any
    byte is written. An array with the bytes of one already added is stored once."""

    def __init__(self, align: int):
        self.align = align
        self.pieces = []        # (offset, 1-D uint8 view of a little-endian contiguous array)
        self.size = 0
        self.contents = Contents()

    def add(self, array, dtype) -> int:
        """Append `array` as `dtype` (little-endian) at the next aligned offset, or find the same
        bytes already in the blob; returns their offset."""
        off = -(-self.size // self.align) * self.align
        dt = np.dtype(dtype).newbyteorder("<")
        a = np.asarray(array)
        n = a.size * dt.itemsize
        known = self.contents.find_or_add(a, dt, off)
        if known is not None:
            return known
        if a.flags.c_contiguous and a.dtype == dt:
            a = a.reshape(-1).view(np.uint8)      # a view: no copy of the tensor
        # else (a constant re-laid out in blocks, schedule/dma.py; another dtype) copied out
        # CHUNK by CHUNK when written, through one scratch buffer: no new pages per tensor
        self.pieces.append((off, a, dt))
        self.size = off + n
        return off

    def __len__(self):
        return self.size

    def _chunks(self):
        """(offset, contiguous uint8 array) of every piece, strided pieces in parts copied into
        one scratch buffer: a chunk is valid until the next one is asked for."""
        scratch = None
        for off, a, dt in self.pieces:
            if a.dtype == np.uint8 and a.ndim == 1:
                yield off, a
                continue
            for part in _parts(a):
                nb = part.size * dt.itemsize
                if scratch is None or scratch.nbytes < nb:
                    scratch = np.empty(max(nb, min(CHUNK, a.size * dt.itemsize)), np.uint8)
                np.copyto(scratch[:nb].view(dt).reshape(part.shape), part, casting="unsafe")
                yield off, scratch[:nb]
                off += nb

    def write_to(self, f):
        """Write the blob's bytes to the binary file object f (alignment gaps are zeros)."""
        at = 0
        for off, a in self._chunks():
            if off > at:
                f.write(bytes(off - at))
            f.write(memoryview(a))
            at = off + a.nbytes

    def __bytes__(self):
        out = bytearray()
        for off, a in self._chunks():
            out += bytes(off - len(out))
            out += memoryview(a)
        return bytes(out)

    def __eq__(self, other):
        return bytes(self) == bytes(other)

    __hash__ = None
