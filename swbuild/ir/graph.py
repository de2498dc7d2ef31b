"""Graph IR: tensors and nodes after import, shape inference and folding."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def is_splat(a) -> bool:
    """A constant with one value everywhere, kept as a zero-stride view (ConstantOfShape)."""
    return isinstance(a, np.ndarray) and a.size > 1 and a.ndim > 0 and all(s == 0 for s in a.strides)


@dataclass
class Tensor:
    name: str
    shape: tuple
    dtype: str                      # numpy dtype name: float32, int64 ...
    data: np.ndarray | None = None  # constants only

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __repr__(self):
        kind = "const " if self.data is not None else ""
        return f"%{self.name}: {kind}{self.dtype}{list(self.shape)}"


@dataclass
class Node:
    op: str
    name: str
    inputs: list       # tensor names ('' for an omitted optional input)
    outputs: list
    attrs: dict = field(default_factory=dict)

    def __repr__(self):
        a = ", ".join(f"{k}={v}" for k, v in sorted(self.attrs.items()))
        return f"{', '.join(self.outputs)} = {self.op}[{a}]({', '.join(self.inputs)})  # {self.name}"


@dataclass
class Graph:
    name: str
    tensors: dict      # name -> Tensor
    nodes: list        # topological order
    inputs: list       # graph input names (non-constant)
    outputs: list
    opset: int = 13    # the model's default-domain opset (some ops changed meaning across versions)
    exact_ints: dict = field(default_factory=dict)   # float32 tensor -> the integer dtype it holds (optimizer/exact_ints.py)
    # a constant that folding computed by DequantizeLinear -> that node (its quantized operands
    # stay in `tensors`): optimizer/qdq_fuse.py rebuilds integer kernels from them
    dequantized: dict = field(default_factory=dict)
    qdq_notes: dict = field(default_factory=dict)    # node -> QDQ chain kept float, and why (optimizer/qdq_fuse.py)
    widened: dict = field(default_factory=dict)      # float32 tensor -> the float16 it stands for (optimizer/halves.py)
    rebiased: dict = field(default_factory=dict)     # int8 tensor -> the uint8 it stands for, minus 128 (optimizer/uint8_as_int8.py)

    def producer(self):
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self):
        out = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def is_const(self, name) -> bool:
        return self.tensors[name].data is not None

    def __str__(self):
        lines = [f"graph {self.name}({', '.join(repr(self.tensors[i]) for i in self.inputs)})"]
        lines += [f"  {n!r}" for n in self.nodes]
        lines.append(f"  return {', '.join(self.outputs)}")
        return "\n".join(lines)
