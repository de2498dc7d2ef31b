"""The BANG emulator (swbuild/runtime/bang): intrinsics against numpy, every rule of
docs/diannao.md caught, exact counters and cycles, and a 4x4 UNION1 kernel with barriers."""
import json
import math
import re

import numpy as np
import pytest

from swbuild.config import toolchain

from bangemu_build import INCLUDE, bangemu_defines, hardware, run


# ---- toolchain files ---------------------------------------------------------------------

def test_toolchains_load_and_emu_inherits_hardware():
    real, emu = toolchain.load("diannao"), toolchain.load("diannao-emu")
    assert (real.family, real.api, real.emulated) == ("diannao", "bang", False)
    assert (emu.family, emu.api, emu.emulated) == ("diannao", "bang", True)
    assert emu.hardware == real.hardware
    assert real.hardware["arch"] in ("mtp_270", "mtp_372")
    assert real.hardware["clusters"] * real.hardware["cores_per_cluster"] == real.hardware["cores"] == 16
    assert real.compilers["primary"] == "cncc" and real.compilers["path_variable"] == "CNCC"
    assert f"--bang-mlu-arch={real.hardware['arch']}" in real.flags["device"]
    assert emu.emulation["runtime"] == "bang"
    assert emu.runtime_include_dirs() == [INCLUDE]


def test_every_hardware_number_reaches_the_emulator():
    """config.h has a default for each toolchain number and no number the toolchain lacks;
    its defaults repeat diannao.toml."""
    text = (INCLUDE / "bangemu" / "config.h").read_text()
    defaults = dict(re.findall(r"#ifndef (BANGEMU_\w+)\n#define \1 (\S+)", text))
    ours = dict(d.split("=", 1) for d in bangemu_defines(hardware()))
    unused = {"BANGEMU_CLOCK_HZ", "BANGEMU_MEM_BANDWIDTH_BYTES_PER_S"}  # time, not cycles
    assert set(defaults) == set(ours) - unused
    for k, v in defaults.items():
        assert float(v) == float(ours[k]), k


def test_loader_defines_follow_the_contract():
    """The loader passes every [hardware] number (the contract itself is checked against
    config.h above), and the arch spelling mtp_NNN becomes the number."""
    got = [d for d in toolchain.load("diannao-emu").runtime_defines() if d.startswith("BANGEMU_")]
    assert sorted(got) == sorted(bangemu_defines(hardware()))
    assert len(got) == sum(isinstance(v, (int, float)) for v in hardware().values()) + 1
    assert "BANGEMU_ARCH=270" in bangemu_defines(hardware(arch="mtp_270"))


# ---- intrinsics against numpy ------------------------------------------------------------

@pytest.fixture(scope="module")
def out(builds, tmp_path_factory):
    d = tmp_path_factory.mktemp("intrinsics")
    run(builds["kernels"], "intrinsics", d)
    return lambda name, dt=np.float32: np.fromfile(d / name, dtype=dt)


def test_elementwise_activations_reductions(out):
    x, y, ew = out("x.f32"), out("y.f32"), out("ew.f32").reshape(13, -1)
    want = [x + y, x - y, x * y, x + 1.5, x - 0.25, x * -2, np.maximum(x, 0),
            1 / (1 + np.exp(-x)), np.tanh(x), np.exp(x), np.abs(x)]
    for i, w in enumerate(want):
        np.testing.assert_allclose(ew[i], w.astype(np.float32), rtol=1e-5, atol=1e-6, err_msg=f"slab {i}")
    per = x.reshape(16, 256)  # slab 11: per task, sum at [0] and max at [32]
    red = ew[11].reshape(16, 256)
    np.testing.assert_allclose(red[:, 0], per.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(red[:, 32], per.max(axis=1))
    # slab 12: __bang_active_log (natural log) of |x| + 0.5
    np.testing.assert_allclose(ew[12], np.log(np.abs(x) + np.float32(0.5)), rtol=1e-5, atol=1e-6)


def test_fills(out):
    np.testing.assert_array_equal(out("fill.f32"), np.repeat(np.float32([2.5, 7.0, 1.0]), 64))


def test_strided_memcpy(out):
    m, got = out("m.f32").reshape(16, 64), out("stride.f32").reshape(16, 16)
    np.testing.assert_array_equal(got[:, :8], m[:, 8:16])
    assert not got[:, 8:].any()


def _windows(src, kh, kw, sh, sw):
    H, W, _ = src.shape
    Ho, Wo = (H - kh) // sh + 1, (W - kw) // sw + 1
    return np.stack([np.stack([src[i * sh:i * sh + kh, j * sw:j * sw + kw] for j in range(Wo)])
                     for i in range(Ho)])  # Ho, Wo, kh, kw, C


def test_pools_hwc(out):
    src, got = out("pool_src.f32").reshape(7, 7, 32), out("pool.f32")
    np.testing.assert_array_equal(got[:288], _windows(src, 3, 3, 2, 2).max(axis=(2, 3)).ravel())
    np.testing.assert_allclose(got[288:864], _windows(src, 3, 2, 2, 1).mean(axis=(2, 3)).ravel(), rtol=1e-6)
    np.testing.assert_array_equal(got[864:], _windows(src, 2, 2, 2, 2).max(axis=(2, 3)).ravel())


def _conv(src, w_oihw, sh, sw):
    win = _windows(src, w_oihw.shape[2], w_oihw.shape[3], sh, sw)  # Ho, Wo, kh, kw, Ci
    return np.einsum("hwyxc,ocyx->hwo", win.astype(np.float64), w_oihw.astype(np.float64))


def _reorder(w_oihw, banks=64):
    """The documented WRAM layout: offset(co, y, x, ci) =
    ((co % 64) * (Co / 64) + co / 64) * kh*kw*Ci + (y*kw + x)*Ci + ci."""
    Co = w_oihw.shape[0]
    ohwi = w_oihw.transpose(0, 2, 3, 1).reshape(Co, -1)
    slot = (np.arange(Co) % banks) * (Co // banks) + np.arange(Co) // banks
    out = np.empty_like(ohwi)
    out[slot] = ohwi
    return out.ravel()


@pytest.mark.parametrize("name,shape", [("conv1", (16, 6, 7, 3, 3, 1, 1, 64)),
                                        ("conv2", (32, 7, 7, 3, 2, 2, 1, 128))])
def test_float_conv_and_wram_layout(out, name, shape):
    Ci, H, W, kh, kw, sw, sh, Co = shape
    src = out(f"{name}_src.f32").reshape(H, W, Ci)
    w = out(f"{name}_w.f32").reshape(Co, Ci, kh, kw)
    np.testing.assert_array_equal(out(f"{name}_wr.f32"), _reorder(w))
    got = out(f"{name}_out.f32").reshape((H - kh) // sh + 1, (W - kw) // sw + 1, Co)
    np.testing.assert_allclose(got, _conv(src, w, sh, sw), rtol=1e-4, atol=1e-4)


def test_fixed_point_conv(out):
    src = out("c16_src.i16", np.int16).reshape(5, 5, 32)
    w = out("c16_w.i16", np.int16).reshape(64, 32, 3, 3)
    want = _conv(src, w, 1, 1) * 2.0 ** -10
    np.testing.assert_allclose(out("c16_out.f32"), want.ravel(), rtol=1e-6)


def test_every_memory_level(out):
    np.testing.assert_array_equal(out("levels.f32"), out("levels_x.f32") * 3)


# ---- counters and cycles -----------------------------------------------------------------

def _granules(addr, length, write, G):
    first, last = addr // G, (addr + length - 1) // G
    n = last - first + 1
    if write and (addr % G or (addr + length) % G):
        n += 1 if first == last else bool(addr % G) + bool((addr + length) % G)
    return n


def test_counters_and_cycles_follow_the_cost_table(builds, tmp_path):
    hw = hardware()
    G, cpg = hw["gdram_granule_bytes"], hw["gdram_cycles_per_granule"]
    mc = hw["memcpy_startup_cycles"]

    def vec(nbytes, chunk=1):
        return hw["vector_startup_cycles"] + math.ceil(nbytes / hw["vector_bytes_per_cycle"]) * chunk

    count_task = (mc + _granules(0, 4096, False, G) * cpg
                  + vec(4096) + vec(4096, hw["transcendental_cycles_per_chunk"])
                  + mc + _granules(4, 100, True, G) * cpg
                  + mc + 3 * hw["strided_segment_cycles"] + 4 * _granules(0, 128, False, G) * cpg)
    barrier_task = 4 * vec(128) + hw["sync_cluster_cycles"] + vec(128)
    waves = [vec(128 * (t + 1)) + (vec(128 * (t + 17)) if t < 4 else 0) for t in range(16)]
    stats = tmp_path / "stats.json"
    run(builds["kernels"], "counters", stats=stats)
    got = json.loads(stats.read_text())
    assert got["arch"] == hw["arch"] and got["violations"] == 0
    k = {e["name"]: e for e in got["kernels"]}
    assert sorted(k) == ["async_k", "barrier_k", "count_k", "waves_k"]
    c = k["count_k"]
    assert c["launches"] == 2
    assert c["cycles"] == 2 * (count_task + hw["launch_cycles"])
    assert c["instructions"] == {"__memcpy": 96, "__bang_add": 32, "__bang_active_sigmoid": 32}
    assert c["memcpy_bytes"] == {"GDRAM2NRAM": 32 * (4096 + 4 * 128), "NRAM2GDRAM": 32 * 100}
    assert 4096 <= c["nram_peak_bytes"] <= got["nram_declared_bytes"]
    b = k["barrier_k"]
    assert b["cycles"] == barrier_task + hw["launch_cycles"]
    assert b["instructions"] == {"__bang_add": 4 * (1 + 2 + 3 + 4) + 16, "__sync_cluster": 16}
    assert k["waves_k"]["cycles"] == max(waves) + hw["launch_cycles"]
    copy = mc + _granules(0, 4096, False, G) * cpg
    assert k["async_k"]["cycles"] == max(copy, vec(4096)) + vec(4096) + hw["launch_cycles"]
    assert k["async_k"]["instructions"] == {"__memcpy_async": 16, "__bang_add": 32}
    assert not list(tmp_path.glob("*.tmp.*"))


def test_union1_4x4_with_cluster_and_all_barriers(builds):
    rows = [list(map(float, line.split())) for line in run(builds["kernels"], "union").stdout.splitlines()]
    assert len(rows) == 16
    for t, (v, task, tdim, cl, cdim, core, kdim) in enumerate(rows):
        assert (task, tdim, cl, cdim, core, kdim) == (t, 16, t // 4, 4, t % 4, 4)
        # neighbour's value from the cluster's own SRAM + core 0's value of the cluster
        assert v == (cl * 100 + (core + 1) % 4) + cl * 100


# ---- rules -------------------------------------------------------------------------------

FATAL = {
    "misaligned": r"__bang_add: NRAM operands must be 64-B aligned \(src1=NRAM\+\d+\)",
    "count": re.escape("__bang_add: n * sizeof(T) must be a multiple of 128 B (n=33, sizeof(T)=4, bytes=132)"),
    "relu_count": re.escape("__bang_active_relu: n * sizeof(T) must be a multiple of 128 B (n=40, sizeof(T)=4, bytes=160)"),
    "not_nram": re.escape("__bang_add: src0 must be in NRAM (src0 is in GDRAM)"),
    "direction": re.escape("__memcpy: GDRAM2NRAM needs dst in NRAM (dst is in WRAM+0)"),
    "direction_src": r"__memcpy: GDRAM2NRAM needs src in GDRAM \(src is in NRAM\+\d+\)",
    "wram_size": re.escape("__memcpy: WRAM copy size must be a multiple of 64 B (GDRAM2WRAM, size=96)"),
    "wram_align": re.escape("__memcpy: WRAM operands must be 8-B aligned (dst=WRAM+4)"),
    "n2n_size": re.escape("__memcpy: NRAM2NRAM size must be a multiple of 128 B (size=64)"),
    "n2n_align": r"__memcpy: NRAM operands must be 64-B aligned \(dst=NRAM\+\d+\)",
    "dst_stride": re.escape("__memcpy: dst_stride must be >= len (dst_stride=64, len=128)"),
    "segnum": re.escape("__memcpy: segnum must be in 0..65535 (segnum=70000)"),
    "nram_bounds": r"__memcpy: dst must stay inside the declared NRAM buffers \(dst=NRAM\+\d+, bytes=65536, declared=\d+\)",
    "gdram_bounds": re.escape("__memcpy: src must stay inside its cnrtMalloc block (offset=64800, bytes=1024, block=65536)"),
    "conv_co": re.escape("__bang_conv: Co must be a multiple of 64 (one WRAM bank per output channel) (Co=32)"),
    "conv_ci": re.escape("__bang_conv: Ci * sizeof(T) must be a multiple of 64 B (Ci=8, sizeof(T)=4)"),
    "conv_kernel_space": r"__bang_conv: kernel must be in WRAM \(kernel is in NRAM\+\d+\)",
    "pool_c": re.escape("__bang_maxpool: C * sizeof(T) must be a multiple of 128 B (HWC layout) (C=16, sizeof(T)=4)"),
    "sram_block": re.escape("__memcpy: SRAM is per cluster and needs a UNION launch (type=BLOCK)"),
    "sync_block": re.escape("__sync_cluster: barriers need a UNION launch (type=BLOCK)"),
    "deadlock": re.escape("__sync_cluster: every task of the barrier must reach it (1 of 4 tasks finished without reaching it)"),
}


@pytest.mark.parametrize("case", sorted(FATAL))
def test_violation_is_one_fatal_line(builds, case):
    r = run(builds["rules"], case, check=False)
    assert r.returncode == 87
    assert re.fullmatch(rf"bangemu: error: kernel {case} task 0: {FATAL[case]}\n", r.stderr), r.stderr


def test_launch_rules(builds):
    r = run(builds["rules"], "union_dim", check=False)
    assert r.returncode == 87
    assert r.stderr == "bangemu: error: kernel clean task 0: launch: UNION needs dim.x % 4 == 0 (dim.x=6)\n"


def test_violations_counted_and_skipped_in_continue_mode(builds, tmp_path):
    stats = tmp_path / "s.json"
    r = run(builds["rules"], "all", stats=stats, cont=True)
    cases = [c for c in FATAL if c != "deadlock"]
    assert len(r.stderr.splitlines()) == len(cases)
    got = json.loads(stats.read_text())
    assert got["violations"] == len(cases)
    per = {k["name"]: k for k in got["kernels"]}
    for c in cases:
        assert per[c]["violations"] == 1 and per[c]["instructions"] == {}, c
    assert per["clean"]["violations"] == 0 and per["clean"]["instructions"]["__memcpy"] == 4


def test_stats_written_on_fatal_exit(builds, tmp_path):
    stats = tmp_path / "s.json"
    assert run(builds["rules"], "count", stats=stats, check=False).returncode == 87
    got = json.loads(stats.read_text())
    assert got["violations"] == 1 and got["kernels"][0]["violations"] == 1


def test_float_conv_only_on_mtp_3xx(builds):
    run(builds["rules"], "conv_float")
    r = run(builds["rules270"], "conv_float", check=False)
    assert r.returncode == 87
    assert r.stderr == ("bangemu: error: kernel conv_float task 0: __bang_conv: float convolution needs "
                        "mtp_3xx (MLU2xx convolves fixed-point int8/int16) (arch=mtp_270)\n")
    run(builds["rules270"], "conv_int16")


def test_nram_over_capacity(builds):
    r = run(builds["rules_big"], "ok", check=False)
    assert r.returncode == 87
    cap = hardware()["nram_bytes"] - hardware()["nram_reserve_bytes"]
    assert re.fullmatch(rf"bangemu: error: kernel clean task 0: __nram__: __nram__ declarations must fit "
                        rf"in NRAM \(declared=\d+ B, capacity={cap} B = \d+ - \d+ reserved by cncc\)\n", r.stderr)


def test_host_misuse(builds):
    r = run(builds["rules"], "host_intrinsic", check=False)
    assert (r.returncode, r.stderr) == (87, "bangemu: error: host: a BANG built-in or intrinsic was used outside a kernel\n")
    r = run(builds["rules"], "host_memcpy", check=False)
    assert r.returncode == 87 and r.stderr.startswith("bangemu: error: host: cnrtMemcpy: dst must come from cnrtMalloc")
