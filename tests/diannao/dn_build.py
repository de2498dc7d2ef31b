"""Helpers of the DianNao backend tests: compile a model for diannao-emu, build it (g++
against the BANG emulator, one compiler at a time) and run it."""
import json
import tempfile
from pathlib import Path

from swbuild.driver import build, check
from swbuild.driver.compiler import compile_to


def build_model(tc, model, name, out_dir, partition="on", **options):
    """compile + build; returns (plan dict, runner path). `options`: recipe options by name
    (grouping="off", weight_prefetch="on", ...); None leaves an option at its default."""
    out_dir = Path(out_dir)
    options = {"partition": partition} | {k: v for k, v in options.items() if v}
    prog, _ = compile_to(model, tc, out_dir, name, options=options)
    steps, _, exe = build.model_steps(tc, prog.prefix, out_dir, out_dir)
    build.run_steps(steps, log=lambda s: None)
    return json.loads((out_dir / f"{prog.prefix}.plan.json").read_text()), exe


def run_check(plan, exe, reference, inputs, rtol=1e-3, atol=1e-4):
    """check_build's document plus the emulator statistics of the same run."""
    doc = check.check_build(plan, exe, reference, inputs, rtol, atol)
    with tempfile.TemporaryDirectory() as tmp:
        _, stats, err, code, _ = check.run_runner(exe, plan, inputs, tmp)
    assert code == 0, err
    return doc, stats


def checked_variants(tc, tmp_path_factory, model, name, variants, seed, rtol=1e-3, atol=1e-4):
    """Build `model` once per entry of `variants` ({label: build_model options}) and check each
    against onnxruntime on the same seeded inputs: {label: (plan, check document, emulator
    statistics, device source text)}."""
    out = {}
    for label, options in variants.items():
        d = tmp_path_factory.mktemp(f"{name}-{label}")
        plan, exe = build_model(tc, model, name, d, **options)
        inputs = check.seeded_inputs(plan["inputs"], seed)
        doc, stats = run_check(plan, exe, check.onnxruntime_reference(model, inputs), inputs, rtol, atol)
        out[label] = plan, doc, stats, (d / f"{plan['prefix']}_device.mlu").read_text()
    return out


def build_bit_exact(tc, model, name, x, tmp_path, **options):
    """Build `model` (one input "x") into tmp_path/b (build_model's `options`) and assert it
    equals onnxruntime bit for bit on `x`, with no BANG violation or copy mismatch; returns
    (plan, runner path)."""
    import numpy as np
    plan, exe = build_model(tc, model, name, tmp_path / "b", **options)
    ref = check.onnxruntime_reference(model, {"x": x})
    doc, stats = run_check(plan, exe, ref, {"x": x}, 0, 0)
    assert doc["status"] == "pass", doc.get("reason")
    assert stats["violations"] == 0 and not doc["emulator"]["copy_mismatches"]
    np.testing.assert_array_equal(check.run_runner(exe, plan, {"x": x}, tmp_path)[0][0], ref[0])
    return plan, exe


def cycles_by_kernel(stats):
    return {k["name"]: k["cycles"] for k in stats["kernels"]}
