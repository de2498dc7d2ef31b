"""Parallel split: spatial tiles are dealt round-robin to the CPEs.

Tiles of the output are disjoint, so no two CPEs ever write the same bytes; dealing the
flattened tile index round-robin fuses small dimensions automatically (swTVM fuses when
the split dimension is smaller than 64) and keeps the load within one tile per CPE.
"""
from __future__ import annotations

import math


def tile_counts(axes, tiles):
    return [math.ceil(a.extent / tiles[a.name]) for a in axes]


def spatial_tiles(kernel, tiles):
    return math.prod(tile_counts(kernel.axes, tiles))


def tiles_of_cpe(kernel, tiles, cpe, cores):
    """Tile coordinates (start per spatial axis) that CPE `cpe` processes, in order."""
    counts = tile_counts(kernel.axes, tiles)
    total = math.prod(counts)
    for t in range(cpe, total, cores):
        coord, rem = [], t
        for a, c in zip(reversed(kernel.axes), reversed(counts)):
            coord.append((rem % c) * tiles[a.name])
            rem //= c
        yield tuple(reversed(coord))
