"""The weights blob as a list of (offset, array) pieces: written straight to its file, never held as bytes.

vgg16's weights are 550 MB; a bytearray copy of them next to the graph's arrays doubled generation memory."""
from __future__ import annotations

import numpy as np


class WeightsBlob:
    """Aligned little-endian tensors laid end to end; `len()` and offsets are known before any byte is written."""

    def __init__(self, align: int):
        self.align = align
        self.pieces = []        # (offset, 1-D uint8 view of a little-endian contiguous array)
        self.size = 0

    def add(self, array, dtype) -> int:
        """Append `array` as `dtype` (little-endian) at the next aligned offset; returns that offset."""
        off = -(-self.size // self.align) * self.align
        # a view when the array already is contiguous little-endian: no copy of the tensor
        a = np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).reshape(-1)
        self.pieces.append((off, a.view(np.uint8)))
        self.size = off + a.nbytes
        return off

    def __len__(self):
        return self.size

    def write_to(self, f):
        """Write the blob's bytes to the binary file object f (alignment gaps are zeros)."""
        at = 0
        for off, a in self.pieces:
            if off > at:
                f.write(bytes(off - at))
            f.write(memoryview(a))
            at = off + a.nbytes

    def __bytes__(self):
        out = bytearray()
        for off, a in self.pieces:
            out += bytes(off - len(out))
            out += memoryview(a)
        return bytes(out)

    def __eq__(self, other):
        return bytes(self) == bytes(other)

    __hash__ = None
