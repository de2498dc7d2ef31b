"""`swbuild run`: run a built model's runner `--warmup W` + `--repeat N` times and read the times
it prints from the chip's own clock (the generated runner, backends/runner_main.py: Sunway
`rtc`, CNRT notifiers on MLU; the emulators' modelled clocks behind the same calls).

The runner is the program `swbuild export` ships, so the numbers here are the numbers it
prints on the machine; this module only writes the inputs, starts it and parses its lines.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field

from ..support.errors import SwbuildError

# The runner's lines (runner_main.py prints them with --times).
RUN_LINE = re.compile(r"^runner: run (\d+)/(\d+)( \(warm-up\))?: ([0-9.]+) ms, ([0-9]+) cycles$")
KERNEL_LINE = re.compile(r"^runner: kernel (\S+): ([0-9.]+) ms per run, (\d+) launches per run, ([0-9]+) cycles per run$")
CLOCK_LINE = re.compile(r"^runner: \d+ runs after \d+ warm-up: .* \(clock ([0-9.e+]+) Hz\)$")


@dataclass
class KernelTime:
    """One launch name's time per run, summed over its launches in a run, mean over the timed runs."""
    name: str
    ms_per_run: float
    launches_per_run: int
    cycles_per_run: int


@dataclass
class Timings:
    """What the runner measured: each run's time (warm-up runs apart) and each kernel's."""
    runs_ms: list = field(default_factory=list)            # the timed runs, in order
    warmup_ms: list = field(default_factory=list)
    run_cycles: list = field(default_factory=list)
    kernels: list = field(default_factory=list)            # KernelTime, in launch order
    clock_hz: float = 0.0

    @property
    def mean_ms(self) -> float:
        return sum(self.runs_ms) / len(self.runs_ms) if self.runs_ms else 0.0

    @property
    def min_ms(self) -> float:
        return min(self.runs_ms) if self.runs_ms else 0.0

    def as_dict(self) -> dict:
        return {"runs_ms": self.runs_ms, "warmup_ms": self.warmup_ms, "run_cycles": self.run_cycles,
                "mean_ms": self.mean_ms, "min_ms": self.min_ms, "clock_hz": self.clock_hz,
                "kernels": [vars(k) for k in self.kernels]}


def parse_times(text, repeat, warmup) -> Timings:
    """The runner's --times lines → Timings; refuses output that lacks a run or the summary."""
    t = Timings()
    for line in text.splitlines():
        m = RUN_LINE.match(line)
        if m:
            (t.warmup_ms if m.group(3) else t.runs_ms).append(float(m.group(4)))
            if not m.group(3):
                t.run_cycles.append(int(m.group(5)))
            continue
        m = KERNEL_LINE.match(line)
        if m:
            t.kernels.append(KernelTime(m.group(1), float(m.group(2)), int(m.group(3)), int(m.group(4))))
            continue
        m = CLOCK_LINE.match(line)
        if m:
            t.clock_hz = float(m.group(1))
    if len(t.runs_ms) != repeat or len(t.warmup_ms) != warmup or not t.clock_hz:
        raise SwbuildError(f"the runner printed {len(t.runs_ms)} timed and {len(t.warmup_ms)} warm-up runs "
                           f"(asked for {repeat} and {warmup}) or no summary line; is it from an older swbuild? "
                           "(rebuild it)")
    return t


def run_model(plan, runner, inputs, repeat=1, warmup=0, timeout=None):
    """Run `runner` on `inputs` (name → array); returns (outputs name → array, Timings)."""
    from .check import run_runner
    if plan.get("mpi"):
        raise SwbuildError(f"model {plan['model']}: swbuild run times one core group's runner; this build spans "
                           "MPI ranks (run it with mpirun, or check it with swbuild check)")
    if repeat < 1 or warmup < 0:
        raise SwbuildError(f"--repeat must be at least 1 and --warmup at least 0 (got {repeat}, {warmup})")
    printed = {}
    with tempfile.TemporaryDirectory(prefix="swrun-") as tmp:
        got, _, err, code, _ = run_runner(runner, plan, inputs, tmp, timeout,
                                          flags=["--repeat", repeat, "--warmup", warmup, "--times"], printed=printed)
    if code != 0:
        from ..backends import family_of_plan
        why = family_of_plan(plan).exit_reasons.get(code)
        raise SwbuildError(f"{runner}: runner exited with status {code}{f' ({why})' if why else ''}: "
                           f"{err.strip()[-500:]}")
    return {o["name"]: g for o, g in zip(plan["outputs"], got)}, parse_times(printed["stdout"], repeat, warmup)


def format_times(t: Timings, model, target) -> str:
    """The table `swbuild run` prints."""
    lines = [f"{model} on {target}: {len(t.runs_ms)} runs after {len(t.warmup_ms)} warm-up, clock {t.clock_hz:.6g} Hz"]
    for i, ms in enumerate(t.warmup_ms, 1):
        lines.append(f"  warm-up {i:3}: {ms:12.6f} ms")
    for i, (ms, cyc) in enumerate(zip(t.runs_ms, t.run_cycles), 1):
        lines.append(f"  run {i:7}: {ms:12.6f} ms  {cyc:14d} cycles")
    lines.append(f"  mean {t.mean_ms:.6f} ms, min {t.min_ms:.6f} ms")
    if t.kernels:
        w = max(len(k.name) for k in t.kernels)
        lines.append(f"  {'kernel':<{w}}  {'ms per run':>12}  {'cycles per run':>14}  launches  share")
        total = sum(k.ms_per_run for k in t.kernels) or 1.0
        for k in t.kernels:
            lines.append(f"  {k.name:<{w}}  {k.ms_per_run:12.6f}  {k.cycles_per_run:14d}  {k.launches_per_run:8d}  "
                         f"{100 * k.ms_per_run / total:5.1f}%")
    return "\n".join(lines)
