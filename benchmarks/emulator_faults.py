"""The emulators' fault suites: how many rules are checked and how many faults are caught.

    python benchmarks/emulator_faults.py [--runner RUNNER ARG ...] [--repeat 3]

Builds the Athread fault program for sunway-emu and sunway-pro-emu at each SWEMU_INSTRUMENT level
(default: plain stores checked; +loads: SWEMU_INSTRUMENT=1; +uninstrumented: SWEMU_INSTRUMENT=0;
tests/runtime/c/faults_*.c) and the BANG one (tests/bang/faults.mlu), runs every fault kernel alone and the
clean kernels in every SWEMU_DMA mode, and prints one JSON document: per suite the faults
tried, the faults reported (exit 86/87 with one error line, or the warning the rule
promises), the ones missed, and whether the clean kernels stayed silent.  With --runner, a
built model runner (e.g. build/sunway-emu/vgg16/vgg16_runner IN OUT) is also timed in each
SWEMU_DMA / SWEMU_CHECKS setting (best of --repeat wall-clock seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "runtime"), str(ROOT / "tests" / "bang")]

from bangemu_build import compile_mlu, hardware  # noqa: E402
from test_faults import build_faults  # noqa: E402

WARN = {"k_race", "k_race_row", "k_direct_same_word", "k_direct_race"}   # rules that warn (swbuild check fails)
STORES = {"k_plain_other", "k_plain_other_stack", "k_direct_same_word"}   # need store checks
LOADS = {"k_load_past", "k_direct_race"}                                   # need SWEMU_INSTRUMENT=1
CLEAN = {"k_clean", "k_race_ok", "k_race_chain", "k_rz_exact", "k_direct_ok"}
LEVELS = {"": "stores", "+loads": "1", "+uninstrumented": "0"}
BANG_WARN = {"task_conflict"}
BANG_GDRAM = {"gdram_misaligned", "gdram_odd_size"}   # rules only a toolchain stating them has


def env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SWEMU_", "BANGEMU_"))}
    e.update(kw)
    return e


def run(argv, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env(**kw), timeout=120)


def caught(p, warn, tool):
    lines = p.stderr.splitlines()
    if warn:
        return p.returncode == 0 and len(lines) == 1 and lines[0].startswith(f"{tool}: warning:")
    return p.returncode in (86, 87) and len(lines) == 1 and lines[0].startswith(f"{tool}: error:")


def athread_suite(name, out, level):
    """A rule is tried only at the levels that check it: plain stores need store checks (not
    SWEMU_INSTRUMENT=0), plain loads SWEMU_INSTRUMENT=1."""
    fp = build_faults(name, out, level)
    kernels = re.findall(r"X\((k_\w+)\)", (ROOT / "tests/runtime/c/faults.h").read_text())
    faults = [k for k in kernels if k not in CLEAN and (level != "0" or k not in STORES)
              and (level == "1" or k not in LOADS)]
    missed = [k for k in faults if not caught(run([fp.exe, k], SWEMU_DMA="wait"), k in WARN, "swemu")]
    silent = all(run([fp.exe, k, k], SWEMU_DMA=m).stderr == "" for k in sorted(CLEAN)
                 for m in ("issue", "wait", "random:1", "random:2"))
    return {"faults": len(faults), "reported": len(faults) - len(missed), "missed": missed,
            "clean_silent": silent}


def bang_suite(out, gdram_rules):
    hw = hardware(gdram_align_bytes=64, gdram_size_multiple_bytes=64) if gdram_rules else hardware()
    exe = compile_mlu(ROOT / "tests/bang/faults.mlu", out / f"bfaults{int(gdram_rules)}", hw)
    cases = re.findall(r"^CASE\((\w+),", (ROOT / "tests/bang/faults.mlu").read_text(), re.M) + ["host_ptr", "plain_last"]
    cases = [c for c in cases if gdram_rules or c not in BANG_GDRAM]
    missed = [c for c in cases if not caught(run([exe, c]), c in BANG_WARN, "bangemu")]
    clean = [run([exe, c]) for c in ("clean", "clean_exact")]
    return {"faults": len(cases), "reported": len(cases) - len(missed), "missed": missed,
            "clean_silent": all(p.returncode == 0 and p.stderr == "" for p in clean)}


def time_runner(argv, repeat):
    out = {}
    for dma, checks in [("issue", "all"), ("wait", "all"), ("random:1", "all"), ("wait", "fast"), ("wait", "full")]:
        best = None
        for _ in range(repeat):
            t = time.perf_counter()
            p = run(argv, SWEMU_DMA=dma, SWEMU_CHECKS=checks)
            dt = time.perf_counter() - t
            if p.returncode != 0:
                best = f"exit {p.returncode}: {p.stderr.strip()[-200:]}"
                break
            best = dt if best is None else min(best, dt)
        out[f"{dma}/{checks}"] = round(best, 3) if isinstance(best, float) else best
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runner", nargs="+", help="a built runner and its arguments, to time")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="swemu-faults-") as tmp:
        tmp = Path(tmp)
        doc = {f"{name}{suffix}": athread_suite(name, tmp / f"{name}{level}", level)
               for name in ("sunway-emu", "sunway-pro-emu") for suffix, level in LEVELS.items()}
        doc["diannao-emu"] = bang_suite(tmp, False)
        doc["diannao-emu+gdram_rules"] = bang_suite(tmp, True)
    doc["total"] = {k: sum(d[k] for d in doc.values()) for k in ("faults", "reported")}
    if a.runner:
        doc["runner_seconds"] = time_runner(a.runner, a.repeat)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
