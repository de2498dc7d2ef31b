"""Run a built model under emulation and compare it with a reference.

The reference is, in order: the expected outputs the user gives (npz keyed by output name),
the expected outputs shipped beside an onnx light model (`<stem>_output_N.pb`, with the
onnx backend test's input convention), or onnxruntime on the same model and inputs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ..backends import family_of_plan
from ..backends.common import BANG_EXIT, LDM_EXIT  # noqa: F401  (scop_recipe reads LDM_EXIT here)
from ..support.errors import SwbuildError
from ..support.progress import Steps


def seeded_inputs(specs, seed, bounds=None):
    """Deterministic inputs from PCG64(seed), per input in order: standard normal floats;
    integers (lookup indices) uniform in [0, bound)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        if s.get("dtype", "float32").startswith("int"):
            out[s["name"]] = rng.integers(0, (bounds or {}).get(s["name"], 2), s["shape"]).astype(s["dtype"])
        else:
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(np.float32)
    return out


def index_bounds(model):
    """For integer graph inputs used as Gather indices: the size of the gathered axis."""
    import onnx
    if hasattr(model, "to_proto"):          # an ArrayModel (the zoo's): nodes and initializer dims
        model = model.to_proto()
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    out = {}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[0] in shapes:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            dims = shapes[n.input[0]]
            b = dims[axis % len(dims)]
            out[n.input[1]] = min(out.get(n.input[1], b), b)
    return out


def light_reference(model_path, specs):
    """Inputs and expected outputs of an onnx 'light' zoo model, or None if not one."""
    if model_path is None:
        return None
    p = Path(model_path)
    pbs = sorted(p.parent.glob(f"{p.stem}_output_*.pb"))
    if not pbs:
        return None
    from onnx import TensorProto, numpy_helper
    outs = []
    for pb in pbs:
        t = TensorProto()
        t.ParseFromString(pb.read_bytes())
        outs.append(numpy_helper.to_array(t))
    # onnx.backend.test.runner.Runner.generate_dummy_data(random=False)
    ins = {}
    for s in specs:
        n = int(np.prod(s["shape"]))
        ins[s["name"]] = (np.arange(n).reshape(s["shape"]) / n).astype(np.float32)
    return ins, outs


def load_npz(path, specs, what):
    """Arrays keyed by the specs' names, each of the spec's shape (and a dtype that casts safely)."""
    names = [s["name"] for s in specs]
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise SwbuildError(f"{path}: cannot read {what} npz: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    missing = [n for n in names if n not in data]
    if missing:
        raise SwbuildError(f"{path}: {what} npz lacks {missing} (it has {sorted(data)})")
    for s in specs:
        a, want = data[s["name"]], tuple(s["shape"])
        if a.shape != want:
            raise SwbuildError(f"{path}: {what} '{s['name']}' has shape {list(a.shape)}; the model needs {list(want)}")
        dt = np.dtype(s.get("dtype", "float32"))
        if a.dtype.kind not in "biuf" or not np.can_cast(a.dtype, dt, "same_kind"):
            raise SwbuildError(f"{path}: {what} '{s['name']}' has dtype {a.dtype}; the model needs {dt}")
    return data


def onnxruntime_reference(model, inputs):
    import onnx
    import onnxruntime as ort
    if hasattr(model, "to_proto"):          # an ArrayModel (the zoo's)
        model = model.to_proto()
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    m = onnx.ModelProto.FromString(m.SerializeToString())
    m.ir_version = min(m.ir_version, 10)   # onnx writes newer IR versions than onnxruntime reads
    # The build may override input shapes (batch=8): give onnxruntime the same shapes.
    for vi in m.graph.input:
        if vi.name in inputs:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for d in inputs[vi.name].shape:
                dims.add().dim_value = int(d)
    del m.graph.value_info[:]
    for vi in m.graph.output:
        vi.type.tensor_type.ClearField("shape")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: inputs[i.name] for i in sess.get_inputs() if i.name in inputs}
    return sess.run(None, feed)


class RunnerTimeout(SwbuildError):
    """The runner ran past the check's timeout; names the kernel it was in when stopped."""


def _run(launch, runner, args, env, timeout):
    """Run (under `launch`, e.g. mpirun, when given) with a deadline. On expiry: SIGTERM (the
    runner prints the kernel it is in, see the generated runner; mpirun forwards the signal to
    its ranks), a short grace, then SIGKILL; raises RunnerTimeout naming the kernel."""
    p = subprocess.Popen(launch + [str(runner)] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        m = re.search(r"stopped in kernel (\S+)", err or "")
        where = f"kernel {m.group(1)} was running" if m else "it was outside the model's kernels (reading inputs, init or writing outputs)"
        raise RunnerTimeout(f"{runner}: runner still running after the {timeout:g} s timeout; {where} "
                            "(raise it with --timeout or the recipe's check.timeout)") from None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def run_runner(runner, plan, inputs, workdir, timeout=None):
    """Run the runner program; returns (outputs list, stats dict, stderr, exit code, seconds).
    An MPI build (plan["mpi"]) runs under mpirun; its stats are then one (emulator, MPI) pair per rank.
    Raises RunnerTimeout after `timeout` seconds."""
    workdir = Path(workdir)
    ins = []
    for k, spec in enumerate(plan["inputs"]):
        f = workdir / f"in{k}.bin"
        dt = np.dtype(spec.get("dtype", "float32")).newbyteorder("<")
        np.ascontiguousarray(inputs[spec["name"]], dtype=dt).reshape(spec["shape"]).tofile(f)
        ins.append(str(f))
    outs = [str(workdir / f"out{k}.bin") for k in range(len(plan["outputs"]))]
    stats = workdir / "emulator_stats.json"
    for old in [stats] + sorted(workdir.glob("emulator_stats.json.rank*")):
        if old.exists():
            old.unlink()
    env = dict(os.environ, SWEMU_STATS=str(stats), BANGEMU_STATS=str(stats))
    launch = []
    if plan.get("mpi"):
        from .mpi import launch_argv
        launch = launch_argv(plan)
    t0 = time.perf_counter()
    p = _run(launch, runner, ins + outs, env, timeout)
    secs = time.perf_counter() - t0
    got = []
    if p.returncode == 0:
        for f, spec in zip(outs, plan["outputs"]):
            got.append(np.fromfile(f, dtype=np.dtype(spec.get("dtype", "float32")).newbyteorder("<")).reshape(spec["shape"]))
    if plan.get("mpi"):
        from .mpi import rank_stats
        st = rank_stats(stats, plan["mpi"]["ranks"])
    else:
        st = json.loads(stats.read_text()) if stats.exists() else None
    return got, st, p.stderr, p.returncode, secs


def compare(got, ref, rtol, atol):
    """Per-output and overall errors; pass is numpy.allclose semantics."""
    per, ok = [], True
    max_abs = max_rel = 0.0
    for g, r in zip(got, ref):
        r = np.asarray(r, dtype=np.float64).reshape(g.shape)
        g = g.astype(np.float64)
        if g.shape != r.shape:
            return False, 0.0, 0.0, [{"error": f"shape {g.shape} != {r.shape}"}]
        with np.errstate(invalid="ignore"):     # inf - inf: those elements compare by isclose, not d
            d = np.abs(g - r)
        finite = np.isfinite(r)
        bad_nan = bool(np.any(np.isnan(g) != np.isnan(r)))
        a = float(np.max(d[finite], initial=0.0))
        big = finite & (np.abs(r) > atol)
        rel = float(np.max(d[big] / np.abs(r[big]), initial=0.0))
        o_ok = bool(np.all(np.isclose(g, r, rtol=rtol, atol=atol, equal_nan=True))) and not bad_nan
        per.append({"max_abs_err": a, "max_rel_err": rel, "pass": o_ok})
        ok &= o_ok
        max_abs, max_rel = max(max_abs, a), max(max_rel, rel)
    return ok, max_abs, max_rel, per


def check_build(plan, runner, reference, inputs, rtol, atol, workdir=None, timeout=None):
    """Run and compare; returns the result document (status pass/fail; a timeout is a fail)."""
    fam = family_of_plan(plan)
    doc = {"model": plan["model"], "target": plan["target"], "rtol": rtol, "atol": atol}
    progress = Steps(2, f"check {plan['model']}")     # the two long parts, on a terminal
    try:
        progress.step(f"running {Path(runner).name}")
        with tempfile.TemporaryDirectory(prefix="swcheck-") as tmp:
            got, stats, err, code, secs = run_runner(runner, plan, inputs, workdir or tmp, timeout)
    except RunnerTimeout as e:
        progress.close()
        doc.update(status="fail", reason=str(e), max_abs_err=None, max_rel_err=None, run_seconds=timeout)
        return doc
    doc["run_seconds"] = round(secs, 3)
    if code != 0:
        progress.close()
        doc.update(status="fail", reason=f"runner exited with status {code}" +
                   (f" ({fam.exit_reasons[code]})" if code in fam.exit_reasons else ""),
                   stderr=err.strip().splitlines()[-5:], max_abs_err=None, max_rel_err=None)
        return doc
    progress.step("the reference (onnxruntime)" if callable(reference) else "comparing")
    ref = reference(inputs) if callable(reference) else reference
    progress.close()
    ok, a, r, per = compare(got, ref, rtol, atol)
    if plan.get("mpi"):
        from .mpi import findings as mpi_findings
        findings = mpi_findings(fam, plan, stats)
    else:
        findings = fam.findings(plan, stats)
    doc.update(max_abs_err=a, max_rel_err=r, outputs=[dict(name=o["name"], **e) for o, e in zip(plan["outputs"], per)],
               emulator=findings)
    reasons = []
    if not ok:
        reasons.append("outputs differ from the reference beyond rtol/atol")
    if findings.get("write_conflicts"):
        reasons.append(f"{findings['write_conflicts']} write conflicts between CPEs")
    if findings.get("races"):
        reasons.append(f"{findings['races']} bytes raced on between CPEs (read by one, written by another, no barrier between)")
    if findings.get("ldm_over_budget"):
        reasons.append(f"LDM peak over the budget in {len(findings['ldm_over_budget'])} kernels")
    if findings.get("dma_mismatches"):
        reasons.append("measured DMA or register communication differs from the compiler's prediction in "
                       f"{len(findings['dma_mismatches'])} kernels")
    if findings.get("violations"):
        reasons.append(f"{findings['violations']} BANG rule violations in the emulator")
    if findings.get("stats") == "missing":
        reasons.append("the emulator wrote no statistics")
    doc["status"] = "fail" if reasons else "pass"
    if reasons:
        doc["reason"] = "; ".join(reasons)
    return doc


