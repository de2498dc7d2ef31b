"""ONNX backend node tests of every claimed op on an emulated target, as figures.

    python benchmarks/conformance.py [--target sunway-emu] [--compile-only] [--list] [--grouping on]

Collects the node tests whose ops `swbuild ops` all claims, compiles each (parameter inputs
bound as constants, tests/conformance/node_bundle.py), links them into one program, runs every
compiled case and compares with the test's own outputs (floats: the case's rtol, atol at
least 1e-5; integers and booleans exactly). Prints one JSON document: cases, compiled,
passed, failed, refused (with the reasons grouped: dtype, attribute or mode, other), errors,
and the pass share. --compile-only stops before the C build (no pass/fail figures).
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
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="sunway-emu")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--list", action="store_true", help="also list every refused and failed case")
    ap.add_argument("--grouping", choices=["on", "off"], help="GraphTurbo grouping of every case")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    from swbuild.config import toolchain
    tc = toolchain.load(a.target)
    if tc.family != "sunway" and not a.compile_only:     # the bundle links Athread host + slave objects
        ap.error(f"running the cases is built for Sunway targets; on {a.target} ({tc.family}) use --compile-only")
    with tempfile.TemporaryDirectory(prefix="swconf-") as d:
        cases = [node_bundle.bind_params(c, i) for i, c in enumerate(node_bundle.collect())]
        for c in cases:
            node_bundle.compile_case(c, tc, d, {"grouping": a.grouping} if a.grouping else None)
        failed = []
        passed = None
        if not a.compile_only:
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
