"""ONNX backend node tests through the emulated Sunway target, compiled into ONE program.

Every case is compiled with its own model prefix (c0, c1, ...; symbols never collide),
the host, slave and weights objects of all cases are linked with a generated dispatcher
main, and each case then runs as `bundle <case> IN... OUT...`. That is one link instead of
hundreds, which keeps the suite within minutes on two cores.

Inputs that are parameters in spirit (a Reshape's shape, Slice's starts, Resize's scales,
Gather's indices, ...) are bound as constants before compiling: an ahead-of-time compiler
with static shapes needs them at compile time. Data tensors stay run-time inputs.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

import onnx_builders
from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.backends.cexpr import CTYPE
from swbuild.support.errors import SwbuildError, UnsupportedError
from swbuild.ops import supported_ops

# input positions bound as constants, per op (see the module docstring)
PARAM_INPUTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Pad": {1, 2, 3},
    "Resize": {1, 2, 3}, "Upsample": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "Split": {1},
    "Gather": {1}, "GatherND": {1}, "ScatterND": {1}, "ConstantOfShape": {0}, "Range": {0, 1, 2}, "ReduceSum": {1}, "ReduceMean": {1},
    "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1}, "ReduceL1": {1}, "ReduceL2": {1},
    "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceSumSquare": {1}, "CumSum": {1},
    "GRU": {1, 2, 3}, "LSTM": {1, 2, 3, 7}, "RNN": {1, 2, 3},     # weights, biases, peepholes
    # weights, zero points and scales of integer products: their sums are proven exact at compile time
    "ConvInteger": {1, 2, 3}, "MatMulInteger": {1, 2, 3}, "QLinearConv": {1, 2, 3, 4, 5, 6, 7, 8},
    "QLinearMatMul": {1, 2, 3, 4, 5, 6, 7},
}
# kernels compute in float32 (booleans as 0/1); typed graph inputs/outputs are converted at
# the boundary, and what the compiler cannot do it refuses with the dtype named
RTOL_MIN, ATOL_MIN = 1e-3, 1e-5     # float32 kernels vs numpy references (erff, expf, ...)


@dataclass
class Case:
    index: int
    name: str
    model: onnx.ModelProto
    inputs: list                      # numpy arrays for the run-time inputs, in graph order
    outputs: list
    rtol: float
    atol: float
    prefix: str = ""
    status: str = "pending"           # compiled | unsupported | error
    reason: str = ""
    plan: dict = field(default_factory=dict)


def collect(ops=None):
    """Node test cases whose every node is an op swbuild claims (all of them, by default)."""
    from onnx.backend.test.case.node import collect_testcases
    claimed = set(ops or supported_ops())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = []
    for c in cases:
        if c.kind != "node" or not c.data_sets:
            continue
        if not all(n.op_type in claimed and n.domain in ("", "ai.onnx") for n in c.model.graph.node):
            continue
        out.append(c)
    return sorted(out, key=lambda c: c.name)


def bind_params(tc, index):
    """Case of a node test with its parameter inputs turned into initializers."""
    inputs, outputs = tc.data_sets[0]
    m, feed = onnx_builders.bind_params(tc.model, inputs, PARAM_INPUTS)
    run_inputs = list(feed.values())
    try:
        expected = [onnx_builders.as_array(o) for o in outputs]
    except ValueError:     # a sequence (Loop's scan outputs of sequences): no array
        return Case(index, tc.name, m, run_inputs, [], 0, 0, status="unsupported",
                    reason="input '-': an output that is a sequence, not a tensor")
    return Case(index, tc.name, m, run_inputs, expected, max(tc.rtol, RTOL_MIN), max(tc.atol, ATOL_MIN))


def compile_case(case, tc, out_dir, options=None):
    from swbuild.driver.compiler import compile_to
    case.prefix = f"c{case.index}"
    if case.status == "unsupported":
        return case
    try:
        for v in case.inputs + case.outputs:    # strings, float8, bfloat16 arrive as TensorProto objects
            if v.dtype.kind not in "biuf":
                raise UnsupportedError(f"dtype {v.dtype} of a graph input/output (no numeric numpy type)")
        program, files = compile_to(case.model, tc, out_dir, case.prefix, options=options)
        case.plan = json.loads(files[f"{case.prefix}.plan.json"])
        case.status = "compiled"
    except UnsupportedError as e:
        case.status, case.reason = "unsupported", e.reason
    except SwbuildError as e:
        case.status, case.reason = "error", str(e)
    except Exception as e:  # a compiler bug: the test reports it with the case's name
        case.status, case.reason = "error", f"{type(e).__name__}: {e}"
    return case


def _compile_one(case, target, out_dir):
    return compile_case(case, toolchain.load(target), out_dir)


def _dispatcher(cases):
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>"]
    for c in cases:
        lines.append(f'#include "{c.prefix}.h"')
    lines += ["static void *load(const char *p, size_t n, size_t sz) {",
              "  void *b = malloc(n * sz + 8); FILE *f = fopen(p, \"rb\");",
              "  if (!b || !f || fread(b, sz, n, f) != n) { fprintf(stderr, \"cannot read %s\\n\", p); exit(2); }",
              "  fclose(f); return b; }",
              "static void save(const char *p, const void *b, size_t n, size_t sz) {",
              "  FILE *f = fopen(p, \"wb\"); if (!f || fwrite(b, sz, n, f) != n) exit(2); fclose(f); }",
              "static char ws[1 << 26] __attribute__((aligned(64)));"]
    for c in cases:
        P, U = c.prefix, c.prefix.upper()
        nin, nout = len(c.plan["inputs"]), len(c.plan["outputs"])
        ity = [CTYPE[s.get("dtype", "float32")] for s in c.plan["inputs"]]
        oty = [CTYPE[s.get("dtype", "float32")] for s in c.plan["outputs"]]
        args = [f"load(a[{i}], {U}_INPUT{i}_ELEMS, sizeof({ity[i]}))" for i in range(nin)]
        outs = [f"o{i}" for i in range(nout)]
        lines.append(f"static int run_{P}(char **a) {{")
        for i in range(nout):
            lines.append(f"  {oty[i]} *o{i} = calloc({U}_OUTPUT{i}_ELEMS + 1, sizeof({oty[i]}));")
        lines.append(f"  if (sizeof ws < {U}_WORKSPACE_SIZE) return 3;")
        lines.append(f"  if ({P}_init() || {P}_run({', '.join(args + outs + ['ws'])})) return 1;")
        lines.append(f"  {P}_teardown();")
        for i in range(nout):
            lines.append(f"  save(a[{nin + i}], o{i}, {U}_OUTPUT{i}_ELEMS, sizeof({oty[i]}));")
        lines.append("  return 0; }")
    lines.append("int main(int argc, char **argv) {")
    lines.append("  if (argc < 2) return 2;")
    for c in cases:
        lines.append(f'  if (!strcmp(argv[1], "{c.prefix}")) return run_{c.prefix}(argv + 2);')
    lines += ["  fprintf(stderr, \"unknown case %s\\n\", argv[1]);", "  return 2; }", ""]
    return "\n".join(lines)


def _run(argv, cwd=None):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd)
    if p.returncode:
        raise RuntimeError(f"{' '.join(map(str, argv[:6]))}... failed:\n{p.stdout[-3000:]}{p.stderr[-3000:]}")


# The bundle's C is compiled without optimisation: the cases are tiny, and the emulator counts
# cycles and DMA by its own model, not by wall time, so -O2 bought nothing here but 3x the
# compile time of about 25 MB of generated C (half the suite's slowest setup). Outputs are
# bit-identical at both levels (x86-64 SSE arithmetic, no FMA contraction without -march;
# test_bundle_opt_level.py holds the libm-heavy cases to that).
BUNDLE_OPT = "-O0"


def build_bundle(cases, tc, gen_dir, jobs=2, opt=BUNDLE_OPT, name="bundle"):
    """Compile every compiled case (at `opt`, after the toolchain's own flags: the last -O
    wins) and link one dispatcher program, gen_dir/`name`; returns its path."""
    from swbuild.runtime.slavecc import rename
    gen_dir = Path(gen_dir)
    obj = gen_dir / f"{name}_obj"
    obj.mkdir(exist_ok=True)
    ok = [c for c in cases if c.status == "compiled"]
    flags = lambda side: (list(tc.flags[side]) + [opt] + [f"-I{d}" for d in tc.runtime_include_dirs()]  # noqa: E731
                          + [f"-D{d}" for d in tc.runtime_defines()] + [f"-I{gen_dir}"])
    gcc = tc.argv("host_cc")
    groups = {"host": [gen_dir / f"{c.prefix}_host.c" for c in ok] + [gen_dir / f"{name}_main.c"],
              "slave": [gen_dir / f"{c.prefix}_slave.c" for c in ok],
              "asm": [gen_dir / f"{c.prefix}_weights.S" for c in ok]}
    (gen_dir / f"{name}_main.c").write_text(_dispatcher(ok))
    work = []
    for side, files in groups.items():
        f = flags("host" if side != "slave" else "slave") if side != "asm" else [f"-Wa,-I,{gen_dir}"]
        d = obj / side
        d.mkdir(exist_ok=True)
        for k in range(jobs):
            part = files[k::jobs]
            if part:
                work.append((gcc + f + ["-c"] + [str(p) for p in part], d))
    with cf.ThreadPoolExecutor(jobs) as ex:
        list(ex.map(lambda w: _run(w[0], cwd=w[1]), work))
    slaves = obj / "all_slaves.o"
    _run(["ld", "-r", "-o", slaves] + sorted((obj / "slave").glob("*.o")))
    rename(str(slaves))   # what the emulated slave compiler does to each slave object
    rt_steps, rt_lib = build.runtime_steps(tc, gen_dir / "_runtime")
    build.run_steps(rt_steps, log=lambda s: None)
    exe = gen_dir / name
    _run(tc.argv("link") + sorted((obj / "host").glob("*.o")) + [slaves] + sorted((obj / "asm").glob("*.o"))
         + [rt_lib] + list(tc.flags["libs"]) + ["-o", exe])
    return exe


def run_case(case, exe, work_dir):
    """Run one case; returns (outputs or None, stats dict or None, stderr)."""
    work_dir = Path(work_dir)
    ins = []
    for i, v in enumerate(case.inputs):
        p = work_dir / f"{case.prefix}_in{i}.bin"
        np.ascontiguousarray(v, dtype=np.dtype(case.plan["inputs"][i].get("dtype", "float32")).newbyteorder("<")).tofile(p)
        ins.append(p)
    outs = [work_dir / f"{case.prefix}_out{i}.bin" for i in range(len(case.outputs))]
    stats = work_dir / f"{case.prefix}_stats.json"
    env = dict(os.environ, SWEMU_STATS=str(stats), SWEMU_TIMEOUT="60")
    p = subprocess.run([str(exe), case.prefix] + [str(x) for x in ins + outs], capture_output=True, text=True, env=env)
    if p.returncode:
        return None, None, f"exit {p.returncode}: {p.stderr.strip()[-500:]}"
    got = [np.fromfile(o, dtype=np.dtype(spec.get("dtype", "float32")).newbyteorder("<")).reshape(ref.shape)
           for o, ref, spec in zip(outs, case.outputs, case.plan["outputs"])]
    return got, json.loads(stats.read_text()) if stats.exists() else None, p.stderr


def prepare_all(gen_dir, target="sunway-emu", ops=None, jobs=2):
    tc = toolchain.load(target)
    cases = [bind_params(c, i) for i, c in enumerate(collect(ops))]
    # compiling a thousand small models is most of the bundle's cost: spread it over the cores
    with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as ex:
        cases = list(ex.map(_compile_one, cases, [target] * len(cases), [str(gen_dir)] * len(cases),
                            chunksize=8))
    exe = build_bundle(cases, tc, gen_dir, jobs) if any(c.status == "compiled" for c in cases) else None
    return cases, exe
