"""`swbuild run` and the generated runner's options: --repeat/--warmup/--times, .npy files,
per-run and per-kernel times from the chip's clock (emulated: athread rtc(), CNRT notifiers),
outputs equal to `swbuild check --save-outputs` on the same inputs."""
import json
import subprocess

import numpy as np
import pytest

import swbuild
from cli_models import conv_softmax_pad
from swbuild import cli
from swbuild.driver.run_times import RUN_LINE, KERNEL_LINE


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    path = conv_softmax_pad(d / "small.onnx")
    np.savez(d / "in.npz", x=np.random.default_rng(11).standard_normal((1, 4, 8, 8)).astype(np.float32))
    return path


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_run_repeats_prints_times_and_writes_the_outputs_check_writes(model, target, tmp_path, capsys):
    out, ins = tmp_path / "b", model.parent / "in.npz"
    assert cli.main(["check", str(model), "-t", target, "-o", str(out), "--inputs", str(ins),
                     "--save-outputs", str(tmp_path / "check.npz")]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(model), "-t", target, "-o", str(out), "--inputs", str(ins), "--repeat", "3",
                     "--warmup", "2", "--outputs", str(tmp_path / "run.npz")]) == 0
    table = capsys.readouterr().out
    with np.load(tmp_path / "check.npz") as c, np.load(tmp_path / "run.npz") as r:
        assert c.files == r.files == ["y"] and np.array_equal(c["y"], r["y"])     # the same program, the same bytes
    assert table.count("  warm-up ") == 2 and table.count("  run ") == 3 and "ms per run" in table

    r = swbuild.run(model, target=target, out=out, inputs=ins, repeat=3, warmup=1)
    t = r.timings
    assert len(t.runs_ms) == len(t.run_cycles) == 3 and len(t.warmup_ms) == 1 and all(ms > 0 for ms in t.runs_ms)
    plan = json.loads((out / "small.plan.json").read_text())
    launches = [k["name"] for k in plan["kernels"]]
    assert [k.name for k in t.kernels] == launches and all(k.launches_per_run == 1 for k in t.kernels)
    # both emulators' clocks are modelled: every run of the same program takes the same cycles
    assert max(t.run_cycles) - min(t.run_cycles) <= 2 and abs(t.warmup_ms[0] - t.runs_ms[0]) < 1e-5
    for ms, cyc in zip(t.runs_ms, t.run_cycles):    # cycles and ms agree through the toolchain's clock
        assert cyc == pytest.approx(ms * 1e-3 * t.clock_hz, rel=1e-3, abs=2)
    assert sum(k.ms_per_run for k in t.kernels) <= t.mean_ms * 1.0001
    assert np.array_equal(r.outputs["y"], np.load(tmp_path / "run.npz")["y"])
    from swbuild.config import toolchain
    assert t.clock_hz == float(toolchain.load(target).hardware["clock_hz"])
    if target == "diannao-emu":
        # notifiers read the emulator's modelled device clock: every run the same, equal to its counters
        rep = swbuild.report(model, target=target, out=out, inputs=ins).document
        cycles = {k["name"]: k["cycles"] for k in rep["kernels"]}
        assert len(set(t.run_cycles)) == 1 and t.run_cycles[0] == sum(k.cycles_per_run for k in t.kernels)
        assert {k.name: k.cycles_per_run for k in t.kernels} == cycles


def test_the_runner_reads_and_writes_npy_and_refuses_a_wrong_shape(model, tmp_path):
    r = swbuild.compile(model, target="sunway-emu", out=tmp_path / "b", exe=True)
    x = np.load(model.parent / "in.npz")["x"]
    np.save(tmp_path / "x.npy", x)
    p = subprocess.run([str(r.runner), "--times", "--repeat", "2", str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert sum(bool(RUN_LINE.match(ln)) for ln in lines) == 2 and any(KERNEL_LINE.match(ln) for ln in lines)
    y = np.load(tmp_path / "y.npy")
    ref = swbuild.check(model, target="sunway-emu", out=tmp_path / "b", inputs={"x": x})
    assert y.dtype == np.float32 and np.array_equal(y, ref.outputs["y"])
    # raw files still work, without --times nothing is printed
    x.tofile(tmp_path / "x.bin")
    p = subprocess.run([str(r.runner), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == ""
    assert np.array_equal(np.fromfile(tmp_path / "y.bin", np.float32).reshape(y.shape), y)
    np.save(tmp_path / "bad.npy", x[:, :2])
    p = subprocess.run([str(r.runner), str(tmp_path / "bad.npy"), str(tmp_path / "z.npy")], capture_output=True, text=True)
    assert p.returncode == 2 and "the model needs shape (1, 4, 8, 8)" in p.stderr and "(1, 2, 8, 8)" in p.stderr
    np.save(tmp_path / "i.npy", x.astype(np.float64))
    p = subprocess.run([str(r.runner), str(tmp_path / "i.npy"), str(tmp_path / "z.npy")], capture_output=True, text=True)
    assert p.returncode == 2 and "the model needs dtype '<f4'" in p.stderr
    p = subprocess.run([str(r.runner), "--repeat", "x", str(tmp_path / "x.npy"), str(tmp_path / "z.npy")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "--repeat needs a whole number" in p.stderr


def test_run_refuses_what_it_cannot_time(model, tmp_path, capsys):
    assert cli.main(["run", str(model), "-t", "sunway", "-o", str(tmp_path / "b")]) == 2
    assert "real chip" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", str(model), "-t", "sunway-emu", "--repeat", "0"])


def test_the_emulated_clocks_run_at_the_toolchains_rate():
    from swbuild.config import toolchain
    for name, hz in [("sunway-emu", "1450000000.0"), ("sunway-pro-emu", "2250000000.0")]:
        assert f"SWEMU_CLOCK_HZ={hz}" in toolchain.load(name).runtime_defines()
    assert "BANGEMU_CLOCK_HZ=1000000000.0" in toolchain.load("diannao-emu").runtime_defines()
    assert toolchain.load("sunway").runtime_defines() == []       # the chip reads its own rtc


def test_times_are_parsed_strictly_and_mpi_builds_are_refused():
    from swbuild.support.errors import SwbuildError
    from swbuild.driver.run_times import parse_times, run_model
    text = ("runner: run 1/2 (warm-up): 2.000000 ms, 2000 cycles\nrunner: run 2/2: 1.500000 ms, 1500 cycles\n"
            "runner: kernel m_g0: 1.250000 ms per run, 2 launches per run, 1250 cycles per run\n"
            "runner: 1 runs after 1 warm-up: mean 1.500000 ms, min 1.500000 ms (clock 1e+06 Hz)\n")
    t = parse_times(text, 1, 1)
    assert t.warmup_ms == [2.0] and t.runs_ms == [1.5] and t.run_cycles == [1500] and t.clock_hz == 1e6
    assert [(k.name, k.ms_per_run, k.launches_per_run, k.cycles_per_run) for k in t.kernels] == [("m_g0", 1.25, 2, 1250)]
    with pytest.raises(SwbuildError, match="printed 1 timed and 1 warm-up runs \\(asked for 2 and 1\\)"):
        parse_times(text, 2, 1)
    with pytest.raises(SwbuildError, match="or no summary line"):
        parse_times(text.rsplit("runner: 1 runs", 1)[0], 1, 1)
    with pytest.raises(SwbuildError, match="spans MPI ranks"):
        run_model({"model": "m", "mpi": {"ranks": 2}}, "m_runner", {})
