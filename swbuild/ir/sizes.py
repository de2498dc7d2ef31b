"""Integer size arithmetic every layer shares: tile counts and buffer alignment."""
from __future__ import annotations


def ceil_div(a, b):
    return -(-a // b)


def round_up(a, m):
    """a rounded up to a multiple of m (buffer and arena alignment)."""
    return ceil_div(a, m) * m
