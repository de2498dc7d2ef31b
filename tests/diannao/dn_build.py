"""Helpers of the DianNao backend tests: compile a model for diannao-emu, build it (g++
against the BANG emulator, one compiler at a time) and run it."""
import json
import tempfile
from pathlib import Path

from swbuild.driver import build, check
from swbuild.driver.compiler import compile_to


def build_model(tc, model, name, out_dir, partition="on", grouping=None, double_buffer=None, cluster_split=None,
                weight_prefetch=None, sram_residency=None, input_stationary=None, concat_in_place=None,
                merge_launches=None, stem_fold=None, cross_layer_prefetch=None, weight_broadcast=None):
    """compile + build; returns (plan dict, runner path). `grouping`, `double_buffer`: None for
    the default (on); `cluster_split`, `weight_prefetch`, `input_stationary` likewise."""
    out_dir = Path(out_dir)
    options = {"partition": partition} | ({"grouping": grouping} if grouping else {}) \
        | ({"double_buffer": double_buffer} if double_buffer else {}) \
        | ({"cluster_split": cluster_split} if cluster_split else {}) \
        | ({"weight_prefetch": weight_prefetch} if weight_prefetch else {}) \
        | ({"sram_residency": sram_residency} if sram_residency else {}) \
        | ({"input_stationary": input_stationary} if input_stationary else {}) \
        | ({"concat_in_place": concat_in_place} if concat_in_place else {}) \
        | ({"merge_launches": merge_launches} if merge_launches else {}) \
        | ({"stem_fold": stem_fold} if stem_fold else {}) \
        | ({"cross_layer_prefetch": cross_layer_prefetch} if cross_layer_prefetch else {}) \
        | ({"weight_broadcast": weight_broadcast} if weight_broadcast else {})
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
