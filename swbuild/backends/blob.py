"""The weights blob as a list of (offset, array) pieces: written straight to its file, never held as bytes.

vgg16's weights are 550 MB; a bytearray copy of them next to the graph's arrays doubled generation memory."""
from __future__ import annotations

import numpy as np


CHUNK = 1 << 24     # bytes of a strided piece copied out at once


def _parts(a):
    """Sub-arrays along the leading axes, each at most CHUNK bytes (or one row), in order."""
    if a.nbytes <= CHUNK or a.ndim <= 1:
        yield a
        return
    for row in a:
        yield from _parts(row)


class WeightsBlob:
    """Aligned little-endian tensors laid end to end; `len()` and offsets are known before any byte is written."""

    def __init__(self, align: int):
        self.align = align
        self.pieces = []        # (offset, 1-D uint8 view of a little-endian contiguous array)
        self.size = 0

    def add(self, array, dtype) -> int:
        """Append `array` as `dtype` (little-endian) at the next aligned offset; returns that offset."""
        off = -(-self.size // self.align) * self.align
        dt = np.dtype(dtype).newbyteorder("<")
        a = np.asarray(array)
        n = a.size * dt.itemsize
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
