"""The long run of the differential fuzzer (tests/fuzz/fuzz_graphs.py; CI runs a fixed slice).

    python benchmarks/fuzz.py [--seeds 0:20] [--cases 24] [--target T ...] [--grouping on] [--resize]

Per seed: `cases` random graphs, those onnxruntime runs are compiled into one program per
target, run under emulation and compared. Prints one JSON document: totals per target
(passed, wrong, refused with reasons) and every wrong case. Exit 1 on
any wrong result. --resize draws random Resize configurations instead (fuzz_graphs.make_resize_case).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import fuzz_graphs  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:10", help="START:STOP")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--target", action="append")
    ap.add_argument("--grouping", choices=["on", "off"], help="GraphTurbo grouping of the combined programs")
    ap.add_argument("--resize", action="store_true", help="random Resize configurations (every mode and attribute)")
    a = ap.parse_args(argv)
    lo, hi = (int(x) for x in a.seeds.split(":"))
    targets = a.target or ["sunway-emu", "sunway-pro-emu", "diannao-emu"]
    tot = {t: {"passed": 0, "wrong": [], "refused": []} for t in targets}
    t0, drawn, kept = time.perf_counter(), 0, 0
    for seed in range(lo, hi):
        with tempfile.TemporaryDirectory(prefix="swfuzz-") as d:
            doc = fuzz_graphs.run(seed, a.cases, targets, d, {"grouping": a.grouping} if a.grouping else None,
                                  fuzz_graphs.make_resize_case if a.resize else fuzz_graphs.make_case)
        drawn, kept = drawn + doc["drawn"], kept + doc["kept"]
        for t, r in doc["targets"].items():
            tot[t]["passed"] += r["passed"]
            tot[t]["wrong"] += [dict(w, seed=seed) for w in r["wrong"]]
            tot[t]["refused"] += [dict(x, seed=seed) for x in r["refused"]]
    print(json.dumps({"seeds": [lo, hi], "drawn": drawn, "kept_by_onnxruntime": kept,
                      "seconds": round(time.perf_counter() - t0, 1), "targets": tot}, indent=2, sort_keys=True))
    return 1 if any(v["wrong"] for v in tot.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
