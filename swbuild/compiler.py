"""The compile driver: model → graph → kernels → target pipeline → files on disk."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import onnx

from .backends import family_of
from .errors import ModelError, SwbuildError, UnknownInputs, UnsupportedError
from .frontends.onnx import ArrayModel, Handover, import_model, load_model
from .lowering import lower
from . import weights_file


def build_program(model, tc, name, input_shapes=None, batch=None, options=None):
    """`model`: a path, a ModelProto, or a Handover of one (the import then holds it alone, and frees it)."""
    try:
        graph = import_model(load_model(model), input_shapes=input_shapes, batch=batch, name=name)
        program = lower(graph, name)
    except (ModelError, UnsupportedError) as e:
        raise _in_file(model, e) from None
    return family_of(tc).optimize(program, tc, options or {})


def main_memory_bytes(program):
    """Main memory one core group holds for the program: the constants its kernels read
    (after the pipeline: re-laid-out copies, not their originals), the arena, inputs and outputs."""
    g = program.graph
    read = {program.root(b.tensor) for k in program.kernels for b in k.buffers.values()}
    weights = sum(g.tensors[t].nbytes for t in sorted(read) if t in g.tensors and g.tensors[t].data is not None)
    io = sum(g.tensors[t].nbytes for t in program.inputs + program.outputs)
    arena = program.memory.arena_bytes if program.memory is not None else 0
    return weights, arena, io


def check_main_memory(program, tc):
    """The toolchain's `mem_bytes_per_cg` is a rule: a program that cannot fit is refused."""
    cap = tc.hardware.get("mem_bytes_per_cg")
    weights, arena, io = main_memory_bytes(program)
    if cap and weights + arena + io > int(cap):
        raise SwbuildError(f"model {program.name}: needs {weights + arena + io} bytes of main memory per core group "
                           f"(weights {weights}, arena {arena}, inputs/outputs {io}); target {tc.name} has "
                           f"mem_bytes_per_cg = {int(cap)}")


def _in_file(model, e):
    """The error with the model file's name in front (a ModelProto has none)."""
    if isinstance(model, (onnx.ModelProto, ArrayModel, Handover)) or str(model) in str(e):
        return e
    where = Path(model).name
    if isinstance(e, UnknownInputs):
        return UnknownInputs(e.names, e.inputs, where)
    return UnsupportedError(f"{where}: {e.reason}") if isinstance(e, UnsupportedError) else ModelError(f"{where}: {e}")


def write_outputs(out_dir, files: dict):
    """Write all files or none: stage in a temp dir beside the target, then rename each."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".swbuild-", dir=out_dir))
    try:
        for name, data in files.items():
            with open(stage / name, "wb") as f:
                if hasattr(data, "write_to"):   # the weights blob, streamed from the graph's arrays
                    data.write_to(f)
                else:
                    f.write(data)
        for name in files:
            os.replace(stage / name, out_dir / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def compile_to(model, tc, out_dir, name, input_shapes=None, batch=None, options=None, extra=None, post=None):
    """Generate every source of `name` for target `tc` into out_dir; returns (program, files).
    `post(program, files, plan) -> (files, plan)` amends the output before it is written
    (the MPI build adds its entry point and rewrites the plan's I/O)."""
    try:
        program = build_program(model, tc, name, input_shapes, batch, options)
        check_main_memory(program, tc)
        fam = family_of(tc)
        files = fam.render(program, tc)
        plan = fam.plan(program, tc)
        if post is not None:
            files, plan = post(program, files, plan)
        files = weights_file.apply(program, tc, files, options)
    except SwbuildError:
        raise
    except RecursionError as e:
        raise SwbuildError(f"model {name}: {e}") from None
    files[f"{program.prefix}.plan.json"] = (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode()
    files.update(extra or {})
    write_outputs(out_dir, files)
    return program, files
