"""`swbuild calibrate`: the micro-benchmark archive builds with its Makefile and runs under
emulation, and ingesting its results.json gives back the numbers the emulator ran on.

The round trips run on a project toolchain whose numbers differ from the shipped ones (a
site's chip), so a fit that returned the shipped file's values would fail: every expected
number is read from the toolchain the emulator was built from."""
import json
import subprocess
import sys
import tarfile

import pytest

from swbuild import cli
from swbuild.config import toolchain
from swbuild.backends.sunway.cost.model import dma_bandwidth

REPS = "4"
MARK = "# measured by swbuild calibrate on 2026-11-28"
EPOCH = "1795824000"   # 2026-11-28 UTC


def site_toolchain(project, name, hardware):
    """A project's toolchains/<name>.toml: the shipped file plus its own [hardware] numbers."""
    shipped = toolchain.find_file(name).read_text()
    (project / "toolchains").mkdir(parents=True, exist_ok=True)
    lines = [f"{k} = {json.dumps(v)}" for k, v in hardware.items()]
    (project / "toolchains" / f"{name}.toml").write_text(shipped + "\n[hardware]\n" + "\n".join(lines) + "\n")
    return toolchain.load(name, project)


def build_and_run(project, target, monkeypatch, capsys):
    """calibrate -o, unpack, make run, calibrate --ingest into out/; returns (fitted toolchain, stdout)."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert cli.main(["calibrate", "--target", target, "-o", "calib.tar"]) == 0
    with tarfile.open(project / "calib.tar") as t:
        t.extractall(project / "x", filter="data")
    d = project / "x" / f"calibrate-{target}"
    r = subprocess.run(["make", "-s", "-C", str(d), "run", f"REPS={REPS}",
                        f"SLAVE_CC={sys.executable} -m swbuild.runtime.slavecc gcc"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((d / "results.json").read_text())
    assert doc["format"] == "swbuild-calibrate-results" and doc["target"] == target
    capsys.readouterr()
    assert cli.main(["calibrate", "--target", target, "--ingest", str(d / "results.json"), "-o", "out"]) == 0
    text = (project / "out" / f"{target}.toml").read_text()
    out = capsys.readouterr().out
    fitted_dir = project / "fitted"
    (fitted_dir / "toolchains").mkdir(parents=True)
    (fitted_dir / "toolchains" / f"{target}.toml").write_text(text)
    base = toolchain.find_file(toolchain.load(target, project).emulates, project)
    (fitted_dir / "toolchains" / base.name).write_text(base.read_text())
    return toolchain.load(target, fitted_dir), text, out


def close(got, want, rel=0.05):
    return abs(got - want) <= rel * abs(want)


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
def test_sunway_round_trip(tmp_path, target, monkeypatch, capsys):
    base = toolchain.load(target).hardware
    site = {"dma_curve": [[s, b * 0.6] for s, b in base["dma_curve"]],
            "dma_fit_peak_bytes_per_s": base["dma_fit_peak_bytes_per_s"] * 0.6, "dma_fit_half_bytes": 700,
            "row_sync_cycles": 150, "array_sync_cycles": 333, "regcomm_latency_cycles": 17, "spawn_seconds": 2.5e-5}
    emu = site_toolchain(tmp_path, target, site).hardware     # the numbers the emulator is built with
    fitted, text, out = build_and_run(tmp_path, target, monkeypatch, capsys)
    hw = fitted.hardware
    for s in (8, 12, 64, 100, 256, 1000, 3000, 8192, 20000, 24576, 32768, 65536):
        assert close(dma_bandwidth(hw, s), dma_bandwidth(emu, s)), (s, dma_bandwidth(hw, s), dma_bandwidth(emu, s))
    assert close(hw["dma_fit_peak_bytes_per_s"], emu["dma_fit_peak_bytes_per_s"])
    for k in ("row_sync_cycles", "array_sync_cycles", "spawn_seconds"):
        assert close(hw[k], emu[k]), (k, hw[k], emu[k])
        assert f"\n{k} = " in text and text.split(f"\n{k} = ")[1].splitlines()[0].endswith(MARK)
    if target == "sunway-emu":          # register messages: Athread v1 only
        assert close(hw["regcomm_latency_cycles"], emu["regcomm_latency_cycles"])
    else:
        assert "\nregcomm_latency_cycles = 17\n" in text and "regcomm_latency_cycles" in out and "not fitted" in out
    # the emulators model no CPE compute: those rates are not fitted, and the report says so
    assert "fma_per_cycle_simd" not in text and "fma_per_cycle_simd" in out and "0 cycles" in out
    assert hw["fma_per_cycle_simd"] == emu["fma_per_cycle_simd"]


def test_diannao_round_trip(tmp_path, monkeypatch, capsys):
    site = {"memcpy_startup_cycles": 40, "gdram_cycles_per_granule": 6, "sram_bytes_per_cycle": 32,
            "nram_bytes_per_cycle": 64, "strided_segment_cycles": 8, "conv_startup_cycles": 100,
            "conv_float_macs_per_cycle": 256, "sync_cluster_cycles": 50, "sync_all_cycles": 300, "launch_cycles": 7000}
    emu = site_toolchain(tmp_path, "diannao-emu", site).hardware
    fitted, text, _ = build_and_run(tmp_path, "diannao-emu", monkeypatch, capsys)
    for k in site:
        assert close(fitted.hardware[k], emu[k]), (k, fitted.hardware[k], emu[k])
        assert text.split(f"\n{k} = ")[1].splitlines()[0].endswith(MARK)
    assert fitted.hardware["nram_bytes"] == emu["nram_bytes"]       # everything else kept


def test_archive_is_deterministic_and_names_the_real_compilers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for target in ("sunway", "sunway-pro", "diannao"):
        assert cli.main(["calibrate", "-t", target, "-o", "a.tar"]) == 0
        assert cli.main(["calibrate", "-t", target, "-o", "b.tar"]) == 0
        assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
        with tarfile.open(tmp_path / "a.tar") as t:
            names = t.getnames()
            mk = t.extractfile(f"calibrate-{target}/Makefile").read().decode()
        assert not any("/runtime/" in n for n in names)          # a real target: no emulator inside
        want = {"sunway": "SLAVE_CC = sw5cc -slave", "sunway-pro": "SLAVE_CC = swgcc -mslave",
                "diannao": "DEVICE_CC = cncc"}[target]
        assert want in mk.splitlines() and "results.json:" in mk


STAND_INS = {   # the real target's Makefile with this machine's compilers and its twin's emulation (as test_export)
    "sunway": lambda sys_cc, emu, lib: ["CC=gcc", "LINK=gcc", "AR=ar", f"SLAVE_CC={sys_cc}", f"CFLAGS=-O2 {emu} -I.",
                                        f"SLAVE_CFLAGS=-O2 {emu} -I.", "LDFLAGS=", f"LDLIBS={lib} -lpthread -lm"],
    "diannao": lambda sys_cc, emu, lib: ["CC=g++", "DEVICE_CC=g++ -x c++", "LINK=g++", f"CFLAGS=-O2 -std=c++17 {emu} -I.",
                                         f"DEVICE_CFLAGS=-O2 -std=c++17 {emu} -I.", "LDFLAGS=-pthread", "LDLIBS=-lm"],
}


@pytest.mark.parametrize("target, key", [("sunway", "array_sync_cycles"), ("diannao", "launch_cycles")])
def test_real_archive_builds_with_a_stand_in_compiler_and_its_results_fit(tmp_path, monkeypatch, capsys, target, key):
    """The sw5cc / cncc Makefile builds and runs with stand-ins; ingesting for the real target
    rewrites its whole file in place: the fitted lines marked, every other line kept."""
    from swbuild.driver import build
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert cli.main(["calibrate", "-t", target, "-o", "c.tar"]) == 0
    with tarfile.open(tmp_path / "c.tar") as t:
        t.extractall(tmp_path / "x", filter="data")
    tc = toolchain.load(f"{target}-emu")
    emu = " ".join([f"-I{d}" for d in tc.runtime_include_dirs()] + [f"-D{d}" for d in tc.runtime_defines()])
    steps, lib = build.runtime_steps(tc, tmp_path / "rt")
    build.run_steps(steps, log=lambda s: None)
    d = tmp_path / "x" / f"calibrate-{target}"
    r = subprocess.run(["make", "-s", "-C", str(d), "run", "REPS=2"]
                       + STAND_INS[target](f"{sys.executable} -m swbuild.runtime.slavecc gcc", emu, lib),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cli.main(["calibrate", "-t", target, "--ingest", str(d / "results.json")]) == 0
    shipped = toolchain.find_file(target).read_text().splitlines()
    text = (tmp_path / "toolchains" / f"{target}.toml").read_text().splitlines()
    marked = [ln for ln in text if ln.endswith(MARK)]
    assert len(text) == len(shipped) + 3 and text[3:] != shipped       # a 3-line header, lines replaced in place
    assert [ln.split("=")[0] for ln in marked] == [ln.split("=")[0] for ln in shipped if ln.split("=")[0] in
                                                   {m.split("=")[0] for m in marked}]
    assert all(a == b for a, b in zip(text[3:], shipped) if not a.endswith(MARK))
    got = toolchain.load(target, tmp_path).hardware[key]
    assert close(got, toolchain.load(target).hardware[key]) and f"{key} = " in "\n".join(marked)


def results(path, programs, target="sunway-emu"):
    path.write_text(json.dumps({"format": "swbuild-calibrate-results", "format_version": 1, "target": target,
                                "programs": programs}))
    return path


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not JSON"),
    (json.dumps({"format": "other"}), "format: expected"),
    (None, "programs[0].measurements[0]: missing key 'cycles'"),
    ("bad-kind", "programs[0].measurements[0].kind: expected one of"),
    ("negative", "programs[0].measurements[0].cycles: expected a number >= 0"),
    ("target", "target: the results are of 'diannao-emu'"),
])
def test_malformed_results_are_refused_naming_file_and_key(tmp_path, monkeypatch, capsys, doc, message):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "results.json"
    m = {"kind": "dma", "dir": "get", "bytes": 64, "ops": 4, "cpes": 64}
    if doc is None:
        results(p, [{"program": "dma", "measurements": [m]}])
    elif doc == "bad-kind":
        results(p, [{"program": "dma", "measurements": [dict(m, kind="dmaa", cycles=1)]}])
    elif doc == "negative":
        results(p, [{"program": "dma", "measurements": [dict(m, cycles=-3)]}])
    elif doc == "target":
        results(p, [{"program": "dma", "measurements": [dict(m, cycles=1)]}], target="diannao-emu")
    else:
        p.write_text(doc)
    capsys.readouterr()
    assert cli.main(["calibrate", "-t", "sunway-emu", "--ingest", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p}: " in err and message in err, err
    assert not (tmp_path / "toolchains").exists()


def test_ingest_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    ms = [{"kind": "dma", "dir": d, "bytes": s, "ops": 4, "cpes": 64, "cycles": 1000 + s} for d in ("get", "put")
          for s in (8, 64, 512, 4096)] + [{"kind": "sync", "width": 8, "ops": 4, "cycles": 400}]
    p = results(tmp_path / "results.json", [{"program": "dma", "measurements": ms}])
    outs = []
    for d in ("a", "b"):
        assert cli.main(["calibrate", "-t", "sunway-emu", "--ingest", str(p), "-o", d]) == 0
        outs.append((tmp_path / d / "sunway-emu.toml").read_bytes())
    assert outs[0] == outs[1]
    text = outs[0].decode()
    assert f"\nrow_sync_cycles = 100   {MARK}\n" in text            # 400 cycles / 4 barriers
    assert "array_sync_cycles" not in text.split("[hardware]")[1]     # not measured: inherited


def test_the_docs_example_runs_as_written(tmp_path):
    """docs/calibrate.md's "Try it here" commands, in a shell, in an empty directory."""
    import os
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "calibrate.md").read_text()
    block = doc.split("## Try it here")[1].split("```sh\n")[1].split("```")[0]
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
               SOURCE_DATE_EPOCH=EPOCH)
    r = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / "toolchains" / "sunway-emu.toml").read_text()
    row = toolchain.load("sunway-emu").hardware["row_sync_cycles"]
    assert f"row_sync_cycles = {row}   {MARK}" in text and "spawn_seconds" in r.stdout
