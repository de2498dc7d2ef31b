"""A lowered model: kernels in topological order plus where every tensor lives."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StaticLoop:
    """A loop with a trip count known at compile time: the host runs its kernels `trips` times."""
    trips: int
    node: str                 # the Scan / Loop node (messages)
    carried: list             # tensors whose values must live across iterations (states, containers)


@dataclass
class LoopSlice:
    """Iteration i of a loop reads / writes bytes [i * stride, (i + 1) * stride) of container
    (reverse: iteration trips - 1 - i)."""
    container: str
    stride: int
    loop: int
    reverse: bool = False


@dataclass
class Program:
    name: str                 # model name as the user wrote it
    prefix: str               # C prefix of every symbol and file
    graph: object             # the Graph (tensor shapes, dtypes, constants)
    kernels: list
    aliases: dict             # tensor -> tensor whose storage it shares
    inputs: list
    outputs: list
    memory: object = None     # optimizer.memory.MemoryPlan
    notes: list = field(default_factory=list)
    slices: dict = field(default_factory=dict)   # tensor -> (container, byte offset): Concat inputs in place
    strided_slices: frozenset = frozenset()      # slices that are not one byte range (DianNao's NHWC channel slices)
    target_state: object = None   # the family's pass state (SunwayState, DianNaoState), set by its pipeline
    grouping: object = None       # optimizer.grouping.Grouping when option `grouping` is on
    loops: dict = field(default_factory=dict)        # loop id -> StaticLoop: kernels with k.loop == id run trips times
    loop_slices: dict = field(default_factory=dict)  # tensor -> LoopSlice: iteration i's part of a container

    def loop_pointer_offset(self, tensor):
        """(container, C expression of the byte offset in it) of a loop slice, else None.
        The host names the iteration `sw_it`."""
        s = self.loop_slices.get(self.root(tensor))
        if s is None:
            return None
        it = f"({self.loops[s.loop].trips - 1} - sw_it)" if s.reverse else "sw_it"
        return s.container, f"(long){it} * {s.stride}"

    def root(self, t):
        while t in self.aliases:
            t = self.aliases[t]
        return t

    def viewed_tensors(self):
        """Tensors another name views or holds (aliases, slices, loop slices and their
        containers): their bytes are not one kernel's to retype."""
        return set(self.aliases) | set(self.aliases.values()) | set(self.slices) \
            | {s.container for s in self.loop_slices.values()} | set(self.loop_slices)

    def io_slot(self, root):
        """("in", i) or ("out", j) when graph input i / output j has storage `root`, else None."""
        for i, t in enumerate(self.inputs):
            if self.root(t) == root:
                return "in", i
        for j, t in enumerate(self.outputs):
            if self.root(t) == root:
                return "out", j
        return None

    def __str__(self):
        lines = [f"program {self.prefix}: inputs {self.inputs} outputs {self.outputs}"]
        for a, b in sorted(self.aliases.items()):
            lines.append(f"  alias %{a} = %{b}")
        lines += [str(k) for k in self.kernels]
        if self.memory is not None:
            lines.append(str(self.memory))
        return "\n".join(lines)
