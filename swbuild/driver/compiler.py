"""The compile driver: model → graph → kernels → target pipeline → files on disk."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import onnx

from ..backends import family_of
from ..backends.blob import Contents
from ..support.errors import ModelError, SwbuildError, UnknownInputs, UnsupportedError
from ..frontends.onnx import ArrayModel, Handover, import_model, load_model
from .lowering import lower
from ..config.recipe_checks import sha256_file
from . import weights_file


def build_program(model, tc, name, input_shapes=None, batch=None, options=None):
    """`model`: a path, a ModelProto, or a Handover of one (the import then holds it alone, and frees it)."""
    from ..config.recipe import inapplicable_options
    bad = inapplicable_options(options, family_of(tc).name)
    if bad:     # before the import: an option that changes nothing is refused, not ignored
        raise SwbuildError(f"target {tc.name}: " + "; ".join(bad))
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
    contents, weights = Contents(), 0
    for t in sorted(read):
        if t in g.tensors and g.tensors[t].data is not None and contents.find_or_add(g.tensors[t].data, g.tensors[t].dtype, t) is None:
            weights += g.tensors[t].nbytes      # the blob stores equal bytes once (backends/blob.py)
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


class _Hashing:
    """A binary sink that hashes what is written through it (to `f`, when given), unless its
    digest is already known."""

    def __init__(self, f=None, digest=None):
        self.f, self.digest = f, digest
        self.h = hashlib.sha256() if digest is None else None

    def write(self, b):
        if self.h is not None:
            self.h.update(b)
        if self.f is not None:
            self.f.write(b)

    def send(self, data):
        if hasattr(data, "write_to"):   # the weights blob, streamed from the graph's arrays
            data.write_to(self)
        else:
            self.write(data)
        return self.digest if self.h is None else self.h.hexdigest()


def _compare(path, data):
    """(same, digest): whether the regular file `path` holds exactly `data`, and the sha256 of
    `data` when it had to be computed to tell (None when the sizes already differ)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False, None
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return False, None
    digest = _Hashing().send(data)
    return sha256_file(path) == digest, digest


def write_outputs(out_dir, files: dict) -> dict:
    """Write all files or none: stage in a temp dir beside the target, then rename each. A file
    already there with the same bytes is left as it is: a rebuild does not rewrite an unchanged
    weights blob (hundreds of MB), and make-style tools see it unchanged. Returns each file's
    sha256 (hex), for the lock."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".swbuild-", dir=out_dir))
    digests, staged = {}, []
    try:
        for name, data in files.items():
            same, digest = _compare(out_dir / name, data)
            if not same:    # a same-size file with other bytes: its new digest is known, not hashed again
                with open(stage / name, "wb") as f:
                    digest = _Hashing(f, digest).send(data)
                staged.append(name)
            digests[name] = digest
        for name in staged:
            os.replace(stage / name, out_dir / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return digests


def compile_to(model, tc, out_dir, name, input_shapes=None, batch=None, options=None, extra=None, post=None,
               digests=None):
    """Generate every source of `name` for target `tc` into out_dir; returns (program, files).
    `post(program, files, plan) -> (files, plan)` amends the output before it is written
    (the MPI build adds its entry point and rewrites the plan's I/O). `digests`: a dict that
    receives each written file's sha256."""
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
    written = write_outputs(out_dir, files)
    if digests is not None:
        digests.update(written)
    return program, files
