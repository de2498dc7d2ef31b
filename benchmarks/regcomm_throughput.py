"""Register communication in the SW26010 emulator: how many messages per second it moves.

    python benchmarks/regcomm_throughput.py [--repeat 3]

Builds the register communication suite (tests/runtime/c/regcomm_*.c) for sunway-emu and
times `k_rc_summa`: the message traffic of 8 SUMMA steps on the 8x8 mesh (per step, the CPE
of column s broadcasts 1000 vectors along its row and the CPE of row s 1000 along its
column; 128,000 puts and 896,000 gets in all). Prints one JSON document: the kernel's
seconds (the emulator's own per-kernel clock, best of --repeat), gets per second and
microseconds per get, and the counts, which must equal the suite's exact ones. Wall time
depends on the machine's cores and load: compare runs made on one machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "runtime")]

from swemu_build import build_program  # noqa: E402

PUTS, GETS = 2 * 8 * 8 * 1000, 2 * 8 * 8 * 7 * 1000


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        exe = build_program("sunway-emu", Path(d), "regcomm_host.c", "regcomm_slave.c", "regcomm")
        best, counts = None, None
        for i in range(a.repeat):
            stats = Path(d) / f"stats{i}.json"
            env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
            env["SWEMU_STATS"] = str(stats)
            p = subprocess.run([str(exe), "k_rc_summa"], capture_output=True, text=True, env=env, timeout=600)
            if (p.returncode, p.stdout) != (0, "ok\n"):
                sys.exit(f"k_rc_summa failed (exit {p.returncode}): {p.stdout}{p.stderr}")
            (k,) = json.loads(stats.read_text())["kernels"]
            counts = k["regcomm"]
            best = k["seconds"] if best is None else min(best, k["seconds"])
    print(json.dumps({
        "kernel": "k_rc_summa", "cores": os.cpu_count(), "seconds": best,
        "gets_per_second": round(GETS / best), "microseconds_per_get": round(best / GETS * 1e6, 3),
        "regcomm": counts, "counts_exact": counts == {"puts": PUTS, "gets": GETS, "putr": PUTS // 2, "getr": GETS // 2,
                                                       "putc": PUTS // 2, "getc": GETS // 2},
    }, indent=1))


if __name__ == "__main__":
    main()
