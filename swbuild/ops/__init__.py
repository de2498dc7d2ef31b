"""ONNX op → loop-nest kernels. One module per op family; each registers its lowerings.

A lowering gets the LowerCtx and the node and either appends kernels (`ctx.add`) or
declares its output an alias of an input (`ctx.alias`): reshapes cost nothing.
"""
from __future__ import annotations

from . import (control, einsum, elementwise, indexing, logical, movement, nn, norm, quant, quant_ms, quant_wide,  # noqa: F401
               recurrent, reduce, resize, shape)  # (each registers its lowerings)
from .base import LOWERINGS


def supported_ops():
    """The ONNX operators (graph passes' internal ones, named `swbuild.X`, are not)."""
    return sorted(op for op in LOWERINGS if not op.startswith("swbuild."))
