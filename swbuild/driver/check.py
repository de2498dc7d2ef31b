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
from ..support.errors import SwbuildError, first_line
from . import float64_check
from ..support.progress import Steps


def seeded_inputs(specs, seed, bounds=None):
    """Deterministic inputs from PCG64(seed), per input in order and of its declared dtype:
    standard normal floats; integers (lookup indices) uniform in [0, bound); bools uniform."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dt = np.dtype(s.get("dtype", "float32"))
        if dt.kind in "iu":
            out[s["name"]] = rng.integers(0, (bounds or {}).get(s["name"], 2), s["shape"]).astype(dt)
        elif dt.kind == "b":
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(bool)
        else:
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(dt)
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
    """Arrays keyed by the specs' names, each of the spec's shape (and a dtype that casts safely);
    a model of one input (output) also takes a .npy."""
    try:
        z = np.load(path, allow_pickle=False)
        if isinstance(z, np.ndarray):       # a .npy
            data = {specs[0]["name"]: z} if len(specs) == 1 else None
        else:
            with z:
                data = {k: z[k] for k in z.files}
    except Exception as e:
        raise SwbuildError(f"{path}: cannot read {what} npz: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if data is None:        # one .npy for a model of several
        raise SwbuildError(f"{path}: one array for {len(specs)} {what}s; give an npz keyed by {[s['name'] for s in specs]}")
    return check_arrays(data, specs, what, path)


def check_arrays(data, specs, what, path="arrays"):
    """`data` (name → array) holds each spec's name with its shape and a dtype that casts safely."""
    names = [s["name"] for s in specs]
    data = {k: np.asarray(v) for k, v in data.items()}
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


def onnxruntime_reference(model, inputs, spec_fallback=True, optimized=True):
    """onnxruntime's outputs; where it implements no kernel for a node's dtype (float64 models:
    Conv, pooling), onnx's reference evaluator's (spec_reference), or NotImplementedError
    without `spec_fallback`. `optimized=False`: the graph as written (ORT_DISABLE_ALL: no QDQ
    fusion, no constant folding), the unoptimised session `reference_spread` compares with."""
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
    if not optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as e:      # onnxruntime has no kernel for an op at this dtype (a float64 Conv,
        if "NOT_IMPLEMENTED" not in str(e):     # MaxPool...): the ONNX spec's evaluator is the reference
            raise
        if not spec_fallback:
            raise NotImplementedError(str(e).splitlines()[0]) from None
        return spec_reference(model, inputs)
    feed = {i.name: inputs[i.name] for i in sess.get_inputs() if i.name in inputs}
    return sess.run(None, feed)


def _spec_reference_files(model_path, inputs_path, outputs_path):
    """spec_reference from files to a file: the child process float64_outputs starts (pickles
    of its own temporary files, which no one else writes)."""
    import pickle
    outs = spec_reference(model_path, pickle.loads(Path(inputs_path).read_bytes()))
    Path(outputs_path).write_bytes(pickle.dumps([np.asarray(o) for o in outs]))


def _spec_reference_child(model, inputs, seconds):
    """spec_reference in a child Python stopped after `seconds` (numpy cannot be interrupted in
    the process; a plain subprocess, not multiprocessing, which would re-run the caller's script)."""
    import pickle
    import sys

    import onnx
    with tempfile.TemporaryDirectory(prefix="swbuild-float64-") as d:
        d = Path(d)
        # weights beside the graph: a model past protobuf's 2 GB cannot be one message
        onnx.save_model(model, str(d / "m.onnx"), save_as_external_data=True, location="m.data")
        (d / "in.pkl").write_bytes(pickle.dumps(inputs))
        code = "import sys; from swbuild.driver.check import _spec_reference_files as f; f(*sys.argv[1:])"
        try:
            p = subprocess.run([sys.executable, "-c", code, str(d / "m.onnx"), str(d / "in.pkl"), str(d / "out.pkl")],
                               capture_output=True, text=True, timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
        if p.returncode != 0:
            raise RuntimeError((p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
        return pickle.loads((d / "out.pkl").read_bytes())


def float64_outputs(model, inputs, seconds=None):
    """(outputs, evaluator): the model widened to float64 (float64_check.to_float64) on the inputs
    widened alike, by onnxruntime when it has a double kernel for every node, else by onnx's
    reference evaluator, in a child process stopped after `seconds` when given (its numpy kernels
    cannot be interrupted in-process); float64_check.Unavailable when neither gives outputs."""
    import onnx
    if hasattr(model, "to_proto"):          # an ArrayModel (the zoo's)
        model = model.to_proto()
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    wide = float64_check.to_float64(m)
    ins = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in inputs.items()}
    try:
        return onnxruntime_reference(wide, ins, spec_fallback=False), "onnxruntime"
    except NotImplementedError as e:
        lacking = first_line(e)
    except Exception as e:
        raise float64_check.Unavailable(f"onnxruntime: {first_line(e)}") from None
    try:
        outs = spec_reference(wide, ins) if seconds is None else _spec_reference_child(wide, ins, seconds)
    except Exception as e:
        raise float64_check.Unavailable(f"onnx.reference: {first_line(e)}") from None
    if outs is None:
        raise float64_check.Unavailable(
            f"onnxruntime has no float64 kernel for some node ({lacking}) and onnx's reference evaluator did "
            f"not finish within {seconds:g} s (float64_check.REFERENCE_SECONDS or the check's timeout)")
    return outs, "onnx.reference"


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


def run_runner(runner, plan, inputs, workdir, timeout=None, flags=(), printed=None):
    """Run the runner program; returns (outputs list, stats dict, stderr, exit code, seconds).
    An MPI build (plan["mpi"]) runs under mpirun; its stats are then one (emulator, MPI) pair per rank.
    Raises RunnerTimeout after `timeout` seconds. `flags`: the runner's options (--repeat N ...);
    `printed`: a dict that receives its standard output as "stdout"."""
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
    p = _run(launch, runner, [str(f) for f in flags] + ins + outs, env, timeout)
    secs = time.perf_counter() - t0
    if printed is not None:
        printed["stdout"] = p.stdout
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


def quantization_steps(model, names):
    """Per graph output, the scale of the DequantizeLinear that produces it (a per-tensor
    constant), else None: a float output of a quantized model may differ from onnxruntime's by
    that one step (a rounding inside moves by an ulp of a different summation order, and
    onnxruntime itself differs by a step between its default and unoptimised sessions)."""
    import onnx
    from onnx import numpy_helper
    arrays = {}
    if hasattr(model, "arrays"):        # the zoo's ArrayModel: nodes from its proto, constants as arrays
        m, arrays = model.proto, model.arrays   # (to_proto would copy vgg16's 553 MB to read nothing)
    else:
        m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    # the TorchScript exporter writes PyTorch's scales as Constant nodes, not initializers
    inits.update({n.output[0]: a.t for n in m.graph.node if n.op_type == "Constant"
                  for a in n.attribute if a.name == "value"})
    steps = {}
    for n in m.graph.node:
        if n.op_type != "DequantizeLinear" or len(n.input) < 2 or n.output[0] not in names:
            continue
        t = inits.get(n.input[1])
        if n.input[1] in arrays:
            s = np.asarray(arrays[n.input[1]])
        elif t is not None and t.data_location != onnx.TensorProto.EXTERNAL:
            s = numpy_helper.to_array(t)
        else:
            continue
        if s.size == 1 and s.dtype == np.float32:
            steps[n.output[0]] = float(s.reshape(-1)[0])
    return [steps.get(x) for x in names]


def compare(got, ref, rtol, atol, steps=None, half=None):
    """Per-output and overall errors; pass is numpy.allclose semantics (NaN equal to NaN, an
    infinity equal to the same infinity), integers and booleans exactly, an output with a
    quantization step (`steps`, quantization_steps) within one step. Per output also: `compared`, the elements whose error
    was really judged (a float reference above `atol` in magnitude; every element of an integer or
    bool output, which compares exactly), `peak` (max |reference|), `err_vs_peak` (max_abs_err /
    peak: the error relative to the output's magnitude) and `special_mismatches` (elements where
    NaN/±inf sit in one and not the other: they have no finite error, so they are counted).
    `half` = (rtol, atol) of a float16 output (check.fp16_rtol / fp16_atol), when larger."""
    per, ok = [], True
    base = rtol, atol
    max_abs = max_rel = 0.0
    for k, (g, r) in enumerate(zip(got, ref)):
        step = steps[k] if steps else None
        rtol, atol = base
        fp16 = half is not None and np.float16 in (np.asarray(r).dtype, g.dtype)
        if fp16:
            rtol, atol = max(rtol, half[0]), max(atol, half[1])
        exact = np.asarray(r).dtype.kind in "biu" and g.dtype.kind in "biu"   # quantized outputs: exact or wrong
        r = np.asarray(r, dtype=np.float64)
        g = g.astype(np.float64)
        if g.size != r.size:
            return False, 0.0, 0.0, [{"error": f"shape {g.shape} != {r.shape}"}]
        r = r.reshape(g.shape)
        finite = np.isfinite(r) & np.isfinite(g)
        d = np.abs(g[finite] - r[finite])
        special = int(np.count_nonzero(~np.isclose(g, r, rtol=0, atol=0, equal_nan=True) & ~finite))
        a = float(np.max(d, initial=0.0))
        rf = np.abs(r[finite])
        big = rf > atol
        rel = float(np.max(d[big] / rf[big], initial=0.0))
        peak = float(np.max(np.abs(r[np.isfinite(r)]), initial=0.0))
        if exact:
            o_ok = bool(np.array_equal(g, r))
        else:
            tol = atol if step is None else max(atol, step * (1 + 1e-6))
            o_ok = bool(np.all(np.isclose(g, r, rtol=rtol, atol=tol, equal_nan=True)))
        per.append({"max_abs_err": a, "max_rel_err": rel, "pass": o_ok, "elements": int(r.size),
                    "compared": int(r.size) if exact else int(np.count_nonzero(np.abs(r[np.isfinite(r)]) > atol)),
                    "peak": peak, "err_vs_peak": a / peak if peak > 0 else None, "special_mismatches": special,
                    **({"quantization_step": step} if step else {}),
                    **({"fp16_tolerance": {"rtol": rtol, "atol": atol}} if fp16 else {})})
        ok &= o_ok
        max_abs, max_rel = max(max_abs, a), max(max_rel, rel)
    return ok, max_abs, max_rel, per


def spec_reference(model, inputs):
    """The model's outputs by onnx's reference evaluator, which implements the operators as
    the ONNX spec writes them (numpy semantics: min/max and their reductions propagate NaN)."""
    import onnx
    from onnx.reference import ReferenceEvaluator
    if hasattr(model, "to_proto"):          # an ArrayModel (the zoo's)
        model = model.to_proto()
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    ev = ReferenceEvaluator(m)
    with np.errstate(all="ignore"):     # NaN and inf are what it is asked about
        return ev.run(None, {k: v for k, v in inputs.items() if k in ev.input_names})


def _special_names(plan, per):
    return [o["name"] for o, e in zip(plan["outputs"], per) if e.get("special_mismatches")]


def _against_spec(doc, plan, got, ref, spec, inputs, rtol, atol, half=None):
    """onnxruntime and swbuild place NaN/inf differently: judge both by the spec evaluator.
    Returns the per-output comparison with the spec when swbuild agrees with it and the reference
    does not (and says so in `doc`), else None."""
    where = _special_names(plan, doc["outputs"])
    try:
        want = spec(inputs)
    except Exception as e:    # an op the evaluator lacks: no verdict from it, the difference stands
        doc["spec_check"] = {"evaluator": "onnx.reference", "error": first_line(e)}
        return None
    ok, a, _, per = compare(got, want, rtol, atol, half=half)
    ref_ok, _, _, _ = compare([np.asarray(r) for r in ref], want, rtol, atol, half=half)
    doc["spec_check"] = {"evaluator": "onnx.reference", "swbuild_agrees": ok, "reference_agrees": ref_ok,
                         "max_abs_err": a, "outputs": [dict(name=o["name"], **e) for o, e in zip(plan["outputs"], per)]}
    if ok and not ref_ok:
        doc["reference_disagrees_with_spec"] = True
        doc["note"] = (f"the reference (onnxruntime) disagrees with the ONNX spec on NaN/inf placement in {where}; "
                       "swbuild agrees with the spec (onnx.reference.ReferenceEvaluator) within rtol/atol")
    return per if ok and not ref_ok else None


def _spread_opinion(doc, plan, got, ref, per, steps, unoptimised, inputs, rtol, atol):
    """A quantized model's float outputs off by more than one step: onnxruntime's own two
    sessions (default, and the graph as written: unoptimised) may disagree by as much, since a
    value within an ulp of a rounding tie rounds either way with the summation order and the
    difference grows through the layers (a per-channel ResNet-18: 2 steps). Such an output
    passes if swbuild's error is within that measured disagreement; the numbers go in
    `reference_spread`. Returns the re-judged per-output list, or None."""
    bad = [k for k, e in enumerate(per) if not e.get("pass")]
    if not bad or any(steps[k] is None or got[k].dtype.kind != "f" or per[k].get("special_mismatches") for k in bad):
        return None
    try:
        other = unoptimised(inputs)
    except Exception as e:      # no verdict from it: the difference stands
        doc["reference_spread"] = {"error": first_line(e)}
        return None
    out, spread = list(per), {}
    for k in bad:
        r, o = np.asarray(ref[k], np.float64), np.asarray(other[k], np.float64).reshape(np.shape(ref[k]))
        finite = np.isfinite(r) & np.isfinite(o)
        width = float(np.max(np.abs(r[finite] - o[finite]), initial=0.0))
        tol = max(atol, steps[k], width) * (1 + 1e-6)
        ok = bool(np.all(np.isclose(got[k].astype(np.float64), r.reshape(got[k].shape), rtol=rtol, atol=tol,
                                    equal_nan=True)))
        name = plan["outputs"][k]["name"]
        spread[name] = {"unoptimised_vs_default": width, "steps": width / steps[k],
                        "swbuild_error": per[k]["max_abs_err"], "within": ok}
        out[k] = dict(per[k], **{"pass": ok, "reference_spread": width})
    doc["reference_spread"] = {"sessions": "onnxruntime default vs ORT_DISABLE_ALL", "outputs": spread}
    if not all(e["pass"] for e in out):
        return None
    doc["note"] = ("quantized outputs differ from the reference (onnxruntime) by more than one quantization step, "
                   "but no more than onnxruntime's default and unoptimised sessions differ from each other: "
                   + ", ".join(f"{n} {v['swbuild_error']:.4g} within {v['unoptimised_vs_default']:.4g} "
                               f"({v['steps']:.3g} steps)" for n, v in spread.items()))
    return out


def _finite_float_failure(got, per):
    """Every output that failed is float and differs on finite values only (NaN/inf placement is
    the spec evaluator's question, integers compare exactly)."""
    bad = [(g, e) for g, e in zip(got, per) if not e.get("pass")]
    return bool(bad) and all(g.dtype.kind == "f" and not e.get("special_mismatches") for g, e in bad)


def _second_opinion(doc, plan, got, ref, wide, inputs, rtol, atol, timeout=None):
    """float64_check.judge into doc["float64_check"]; True (with a note) when the difference is rounding."""
    seconds = min(float64_check.REFERENCE_SECONDS, timeout or float64_check.REFERENCE_SECONDS)
    second = float64_check.judge([o["name"] for o in plan["outputs"]], got, [np.asarray(r) for r in ref], wide,
                                 inputs, rtol, atol, seconds)
    doc["float64_check"] = second
    if not second["rounding"]:
        return False
    doc["note"] = (f"outputs differ from the reference (onnxruntime) beyond rtol/atol by float32 rounding alone: "
                   f"{float64_check.summary(second)}, within {float64_check.ROUNDING_FACTOR:g}x")
    return True


def check_build(plan, runner, reference, inputs, rtol, atol, workdir=None, timeout=None, spec=None, keep=None,
                steps=None, half=None, wide=None, unoptimised=None):
    """Run and compare; returns the result document: status pass, fail (a timeout is a fail) or
    vacuous (nothing compared: every reference element within atol of zero). `spec(inputs)`,
    when given, computes the outputs as the ONNX spec says (spec_reference): when swbuild and the
    reference differ in where NaN/inf fall, swbuild passes if it agrees with the spec.
    `wide(inputs, seconds)`, when given, is (float64 outputs, evaluator) of the model widened to float64
    (float64_outputs): when finite float outputs differ from the reference, swbuild
    passes if its error against float64 is float32 rounding, within float64_check.ROUNDING_FACTOR
    of the reference's own (the numbers go in `float64_check`).
    `unoptimised(inputs)`, when given, is onnxruntime's unoptimised session's outputs: a quantized
    output (one with a step in `steps`) beyond one step passes within that session's own
    difference from the reference (_spread_opinion, numbers in `reference_spread`).
    `keep`: a dict that receives the runner's outputs (name → array) when it ran to the end."""
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
    if keep is not None and code == 0:
        keep.update((o["name"], g) for o, g in zip(plan["outputs"], got))
    if code != 0:
        progress.close()
        doc.update(status="fail", reason=f"runner exited with status {code}" +
                   (f" ({fam.exit_reasons[code]})" if code in fam.exit_reasons else ""),
                   stderr=err.strip().splitlines()[-5:], max_abs_err=None, max_rel_err=None)
        return doc
    progress.step("the reference (onnxruntime)" if callable(reference) else "comparing")
    ref = reference(inputs) if callable(reference) else reference
    progress.close()
    ok, a, r, per = compare(got, ref, rtol, atol, steps, half)
    if plan.get("mpi"):
        from .mpi import findings as mpi_findings
        findings = mpi_findings(fam, plan, stats)
    else:
        findings = fam.findings(plan, stats)
    outs = [dict(name=o["name"], **e) for o, e in zip(plan["outputs"], per)]
    compared = sum(e.get("compared", 0) for e in per)
    peaks = [e["err_vs_peak"] for e in per if e.get("err_vs_peak") is not None]
    doc.update(max_abs_err=a, max_rel_err=r, outputs=outs, emulator=findings, compared=compared,
               elements=sum(e.get("elements", 0) for e in per), max_err_vs_peak=max(peaks) if peaks else None)
    reasons = []
    if not ok and spec is not None and _special_names(plan, per):
        by_spec = _against_spec(doc, plan, got, ref, spec, inputs, rtol, atol, half)
        if by_spec is not None:     # the verdict is the spec's: so is what it compared
            ok, per = True, by_spec
            doc["compared"] = compared = sum(e["compared"] for e in per)
    if not ok and unoptimised is not None and steps:
        by_spread = _spread_opinion(doc, plan, got, ref, per, steps, unoptimised, inputs, rtol, atol)
        if by_spread is not None:
            ok, per = True, by_spread
            doc["outputs"] = outs = [dict(name=o["name"], **e) for o, e in zip(plan["outputs"], per)]
    if not ok and wide is not None and _finite_float_failure(got, per):
        ok = _second_opinion(doc, plan, got, ref, wide, inputs, rtol, atol, timeout)
    if not ok:
        special = {o["name"]: o["special_mismatches"] for o in outs if o.get("special_mismatches")}
        reasons.append("outputs differ from the reference beyond rtol/atol" +
                       (f" (NaN/inf in one and not the other: {special} elements)" if special else ""))
        second = doc.get("float64_check")
        if second is not None:
            reasons.append((f"not float32 rounding: {float64_check.summary(second)}, more than "
                            f"{float64_check.ROUNDING_FACTOR:g}x" if not second.get("skipped")
                            else f"no float64 second opinion: {second['skipped']}"))
        if doc.get("spec_check", {}).get("swbuild_agrees") is False:
            reasons.append("swbuild differs from the ONNX spec evaluator (onnx.reference) as well")
    if findings.get("write_conflicts"):
        reasons.append(f"{findings['write_conflicts']} write conflicts between CPEs")
    if findings.get("races"):
        reasons.append(f"{findings['races']} bytes raced on between CPEs (read by one, written by another, no barrier between)")
    if findings.get("ldm_over_budget"):
        reasons.append(f"LDM peak over the budget in {len(findings['ldm_over_budget'])} kernels")
    if findings.get("dma_mismatches"):
        reasons.append("measured DMA, register communication or RMA differs from the compiler's prediction in "
                       f"{len(findings['dma_mismatches'])} kernels")
    if findings.get("copy_mismatches"):
        reasons.append("bytes copied per direction (GDRAM and on chip) differ from the plan's prediction, or were not "
                       f"predicted, in {len(findings['copy_mismatches'])} launches: "
                       + ", ".join(m["kernel"] for m in findings["copy_mismatches"][:5]))
    if findings.get("violations"):
        reasons.append(f"{findings['violations']} BANG rule violations in the emulator")
    if findings.get("stats") == "missing":
        reasons.append("the emulator wrote no statistics")
    doc["status"] = "fail" if reasons else "pass"
    if reasons:
        doc["reason"] = "; ".join(reasons)
    elif compared == 0:
        # relative error is only measured above atol: a reference that small compares nothing
        peak = max((e.get("peak", 0.0) for e in per), default=0.0)
        doc["status"] = "vacuous"
        doc["reason"] = (f"nothing was compared: every output element of the reference is within atol={atol:g} of zero "
                         f"(largest |value| {peak:.3g}), so a wrong result would pass too; feed inputs that exercise "
                         "the model (--inputs in.npz; weights trained or with BatchNorm statistics that keep "
                         "activations from vanishing), or lower atol (--set atol=... or the recipe's check.atol)")
    return doc
