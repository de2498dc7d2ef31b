"""ONNX backend node tests of every claimed op on an emulated target, as figures.

    python benchmarks/conformance.py [--target sunway-emu] [--compile-only] [--list] [--grouping on]
                                     [--ops Resize,Upsample,GatherND,ScatterND,Gather]

Collects the node tests whose ops `swbuild ops` all claims, compiles each (parameter inputs
bound as constants, tests/conformance/node_bundle.py), links them into one program, runs every
compiled case and compares with the test's own outputs (floats: the case's rtol, atol at
least 1e-5; integers and booleans exactly). Prints one JSON document: cases, compiled,
passed, failed, refused (with the reasons grouped: dtype, attribute or mode, other), errors,
and the pass share. --compile-only stops before the C build (no pass/fail figures). --ops
keeps the cases made only of those ops. On a DianNao target (the bundle links Athread objects)
each case builds and runs as its own program.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "conformance"), str(ROOT / "tests")]   # node_bundle, onnx_builders

import node_bundle  # noqa: E402


def _group(reason):
    return "dtype" if "dtype" in reason else "attribute or mode" if any(
        w in reason for w in ("attribute", "mode", "not supported")) else "other"


def _passes(case, got):
    for g, r in zip(got, case.outputs):
        if g.dtype != r.dtype or g.shape != r.shape:
            return False
        if r.dtype.kind in "biu":
            if not np.array_equal(g, r):
                return False
        elif not np.allclose(g, r, rtol=case.rtol, atol=case.atol, equal_nan=True):
            return False
    return True


def _run_combined(cases, tc, gen_dir):
    """(case, None or why not) for every case: the cases of one opset run as one program (one
    build instead of one each); a group whose program fails to build or run goes case by case."""
    from onnx import compose, helper

    from swbuild.driver import build, check
    from swbuild.driver.compiler import compile_to
    groups = collections.defaultdict(list)
    for c in cases:
        groups[max(o.version for o in c.model.opset_import if o.domain in ("", "ai.onnx"))].append(c)
    for opset, group in sorted(groups.items()):
        work = gen_dir / f"opset{opset}"
        try:
            parts = [compose.add_prefix(c.model, f"m{k}_") for k, c in enumerate(group)]
            g = helper.make_graph([n for p in parts for n in p.graph.node], "cases",
                                  [i for p in parts for i in p.graph.input], [o for p in parts for o in p.graph.output],
                                  initializer=[t for p in parts for t in p.graph.initializer])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
            prog, _ = compile_to(m, tc, work, "cases")
            rt_steps, rt_lib = build.runtime_steps(tc, work / "rt")
            steps, _, exe = build.model_steps(tc, prog.prefix, work, work, rt_lib)
            build.run_steps(rt_steps + steps, log=lambda s: None)
            plan = json.loads((work / "cases.plan.json").read_text())
            feed = {f"m{k}_{vi.name}": v for k, c in enumerate(group) for vi, v in zip(c.model.graph.input, c.inputs)}
            got, _, err, code, _ = check.run_runner(exe, plan, feed, work)
            if code != 0:
                raise RuntimeError(err)
        except Exception:
            for c in group:
                yield c, _run_alone(c, tc, gen_dir)
            continue
        it = iter(got)
        for c in group:
            yield c, None if _passes(c, [next(it) for _ in c.outputs]) else "outputs differ"


def _run_alone(case, tc, gen_dir):
    """Build one compiled case as its own program, run it, judge outputs and the emulator's
    findings (swbuild's check); None when it passes, else why not."""
    from swbuild.driver import build, check
    work = gen_dir / f"{case.prefix}_run"
    work.mkdir(exist_ok=True)
    rt = gen_dir / "_runtime"
    rt_steps, rt_lib = build.runtime_steps(tc, rt)
    if not (rt / "libswemu.a").exists():
        build.run_steps(rt_steps, log=lambda s: None)
    steps, _, exe = build.model_steps(tc, case.prefix, gen_dir, work, rt_lib)
    try:
        build.run_steps(steps, log=lambda s: None)
    except Exception as e:
        return f"build: {str(e).splitlines()[0]}"
    feed = {vi.name: v for vi, v in zip(case.model.graph.input, case.inputs)}
    doc = check.check_build(case.plan, exe, case.outputs, feed, case.rtol, case.atol, workdir=work)
    return None if doc["status"] == "pass" else f"{doc['status']}: {doc.get('reason')}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--list", action="store_true", help="also list every refused and failed case")
    ap.add_argument("--grouping", choices=["on", "off"], help="GraphTurbo grouping of every case")
    ap.add_argument("--ops", help="comma-separated ops: only the cases made of these (default: every claimed op)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    from swbuild.config import toolchain
    tc = toolchain.load(a.target)
    ops = a.ops.split(",") if a.ops else None
    with tempfile.TemporaryDirectory(prefix="swconf-") as d:
        cases = [node_bundle.bind_params(c, i) for i, c in enumerate(node_bundle.collect(ops))]
        for c in cases:
            node_bundle.compile_case(c, tc, d, {"grouping": a.grouping} if a.grouping else None)
        failed = []
        passed = None
        if not a.compile_only and tc.family != "sunway":     # the bundle links Athread host + slave objects
            passed = 0
            for c, why in _run_combined([c for c in cases if c.status == "compiled"], tc, Path(d)):
                passed += why is None
                if why is not None:
                    failed.append({"case": c.name, "why": why})
        elif not a.compile_only:
            exe = node_bundle.build_bundle(cases, tc, d)
            passed = 0
            for c in cases:
                if c.status != "compiled":
                    continue
                got, _, err = node_bundle.run_case(c, exe, d)
                if got is not None and _passes(c, got):
                    passed += 1
                else:
                    failed.append({"case": c.name, "why": err if got is None else "outputs differ"})
    refused = [c for c in cases if c.status == "unsupported"]
    doc = {"target": a.target, "cases": len(cases), "compiled": sum(c.status == "compiled" for c in cases),
           "passed": passed, "failed": len(failed), "refused": len(refused),
           "refused_by_kind": dict(collections.Counter(_group(c.reason) for c in refused)),
           "errors": [{"case": c.name, "reason": c.reason} for c in cases if c.status == "error"],
           "pass_share": None if passed is None else round(passed / len(cases), 4),
           "seconds": round(time.perf_counter() - t0, 1)}
    if a.list:
        doc["refused_cases"] = {c.name: c.reason for c in refused}
        doc["failed_cases"] = failed
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 1 if failed or doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
