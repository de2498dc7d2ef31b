"""The Athread emulation runtime (swbuild/runtime/athread) and the emulated slave compiler.

One test program (tests/runtime/c: host.c + slave_v1.c or slave_crts.c, kernels shared in
slave_common.inc) is built per API with the toolchain's own flags; `prog run` exercises the
good kernels and dumps the arrays, `prog bcast` the Athread v1 BCAST_MODE kernels (v1 slave
file only), the other modes each trigger one fatal error.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import shared_builds
from swbuild.driver import build
from swbuild.config import toolchain
from swbuild.runtime import slavecc

C_DIR = Path(__file__).parent / "c"
APIS = {
    "sunway-emu": SimpleNamespace(slave="slave_v1.c", api="athread", cap=65536, dma="athread_get"),
    "sunway-pro-emu": SimpleNamespace(slave="slave_crts.c", api="crts", cap=262144, dma="CRTS_dma_iget"),
}
NF = 4096


def _cflags(tc, side):
    flags = list(tc.flags[side]) + ["-Wall", "-Wextra", "-Werror"]
    for inc in tc.runtime_include_dirs():
        flags += ["-I", str(inc)]
    return flags + [f"-D{d}" for d in tc.runtime_defines()] + ["-I", str(C_DIR)]


@pytest.fixture(scope="module", params=list(APIS))
def prog(request, tmp_path_factory):
    name = request.param
    tc = toolchain.load(name)
    out = tmp_path_factory.mktemp(name)
    lib, steps = shared_builds.runtime_lib(tc, out), []     # once a run (shared_builds.py)
    host_o, slave_o, exe = out / "host.o", out / "slave.o", out / "prog"
    src = C_DIR / APIS[name].slave
    steps += [
        build.Step("host", tc.argv("host_cc") + _cflags(tc, "host") + ["-c", str(C_DIR / "host.c"), "-o", str(host_o)], [], [host_o]),
        build.Step("slave", tc.argv("slave_cc") + _cflags(tc, "slave") + ["-c", str(src), "-o", str(slave_o)], [], [slave_o]),
        build.Step("link", tc.argv("link") + tc.flags["link"] + [str(host_o), str(slave_o), str(lib)] + tc.flags["libs"] + ["-o", str(exe)], [], [exe]),
    ]
    build.run_steps(steps, log=lambda *a: None)
    return SimpleNamespace(name=name, exe=exe, dir=out, slave_o=slave_o, **vars(APIS[name]))


def run(prog, *args, stats=None, timeout=60, **swemu_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env.update(swemu_env)
    if stats:
        env["SWEMU_STATS"] = str(stats)
    return subprocess.run([str(prog.exe), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def good(prog):
    """`prog run`: stats, stdout/stderr and the dumped arrays."""
    stats, dump = prog.dir / "stats.json", prog.dir / "dump.bin"
    p = run(prog, "run", dump, stats=stats)
    assert p.returncode == 0, p.stderr
    raw = dump.read_bytes()
    f = np.frombuffer(raw[: 4 * NF * 4], dtype=np.float32).reshape(4, NF)
    i = np.frombuffer(raw[4 * NF * 4:], dtype=np.int32).reshape(3, 192)
    return SimpleNamespace(p=p, stats=json.loads(stats.read_text()), out=f[0], out2=f[1],
                           out3=f[2], out4=f[3], shared=i[0], res=i[1], tl=i[2])


def kernel(stats, name):
    return next(k for k in stats["kernels"] if k["name"] == name)


# ---- counters -----------------------------------------------------------------------

def test_stats_header_and_order(prog, good):
    s = good.stats
    assert (s["api"], s["cpes"], s["ldm_bytes"]) == (prog.api, 64, prog.cap)
    assert 0 < s["ldm_static_bytes"] < 1024
    assert [k["name"] for k in s["kernels"]] == [
        "k_counts", "k_stride", "k_conflict", "k_selfover", "k_rewrite", "k_barrier", "k_simd", "k_leak", "k_full"]


def test_counters_exact(prog, good):
    k = kernel(good.stats, "k_counts")     # spawned twice: 64 CPEs x (3 gets + 1 strided put)
    assert k["spawns"] == 2
    assert k["dma"] == {"get": {"ops": 384, "bytes": 384 * 256}, "put": {"ops": 128, "bytes": 128 * 256}}
    assert k["dma_hist"] == {"256": 512}
    assert k["ldm_peak_bytes"] == 768 + 64
    assert k["ldm_leaked_bytes"] == 2 * 64 * 64
    assert k["write_conflicts"] == 0
    assert k["seconds"] > 0
    k = kernel(good.stats, "k_stride")
    assert k["dma"] == {"get": {"ops": 64, "bytes": 64 * 256}, "put": {"ops": 128, "bytes": 128 * 256}}
    k = kernel(good.stats, "k_barrier")
    assert (k["dma"]["get"]["ops"], k["dma"]["put"]["ops"]) == (3 * 64, 7 * 64)
    assert k["dma_hist"] == {"4": 10 * 64}
    assert kernel(good.stats, "k_simd")["dma_hist"] == {"32": 64}
    k = kernel(good.stats, "k_selfover")    # 64 B + 48 B per CPE: buckets are floor(log2)
    assert k["dma"]["put"] == {"ops": 128, "bytes": 64 * (64 + 48)} and k["dma_hist"] == {"32": 64, "64": 64}


def test_ldm_reset_between_kernels_and_leaks_counted(prog, good):
    leak, full = kernel(good.stats, "k_leak"), kernel(good.stats, "k_full")
    assert leak["ldm_peak_bytes"] == prog.cap // 2
    assert leak["ldm_leaked_bytes"] == 64 * prog.cap // 2
    # k_full allocates cap - 16 KB: it only fits because k_leak's buffer was reclaimed
    assert full["ldm_peak_bytes"] == prog.cap - 16384
    assert full["ldm_leaked_bytes"] == 0


# ---- DMA semantics --------------------------------------------------------------------

def test_strided_dma_matches_numpy(good):
    a = np.arange(NF, dtype=np.float32)
    m = a.reshape(64, 64)
    tiles = np.stack([m[(i // 8) * 8:(i // 8) * 8 + 8, (i % 8) * 8:(i % 8) * 8 + 8].ravel() for i in range(64)])
    np.testing.assert_array_equal(good.out3.reshape(64, 64), tiles)    # strided get
    np.testing.assert_array_equal(good.out4, 2 * a + 1)               # strided put
    # k_counts: CPE i put 4 chunks of 16 floats, pitch 64 floats, from in[192 i % NF ...]
    exp = np.zeros(NF, dtype=np.float32)
    for i in range(64):
        base = (i % 4) * 16 + (i // 4) * 256
        for k in range(4):
            src = 192 * i % NF + 16 * k
            exp[base + 64 * k: base + 64 * k + 16] = a[src:src + 16]
    np.testing.assert_array_equal(good.out, exp)


def test_write_conflicts(good):
    assert kernel(good.stats, "k_conflict")["write_conflicts"] == 63 * 32   # bytes
    assert kernel(good.stats, "k_selfover")["write_conflicts"] == 0
    # the same bytes written by two CPEs, an array barrier between: ordered, not a conflict
    k = kernel(good.stats, "k_rewrite")
    assert (k["write_conflicts"], k["races"], k["dma"]["put"]["ops"]) == (0, 0, 128)
    base = int(re.search(r"conflict_base=(0x[0-9a-f]+)", good.p.stdout).group(1), 16)
    warns = [ln for ln in good.p.stderr.splitlines() if ln.startswith("swemu:")]
    assert warns == [f"swemu: warning: kernel k_conflict: 2016 write conflicts, first at {base + 32:#x} by CPE 0 and 1"]


def test_get_in_flight_across_a_barrier_orders_later_reads(prog, tmp_path):
    """A get issued before an array barrier and waited after it (prefetch across kernels of a
    grouped launch) may land inside the barrier, on the spin timer. Accesses after the barrier
    are still ordered after the other CPEs' writes before it: no race. (The clock snapshot a
    landing took inside the barrier, before the members' clocks merged, used to be reused
    after it; every neighbour read then looked unordered.)"""
    stats = tmp_path / "stats.json"
    rounds = 300
    p = run(prog, "inflight", rounds, stats=stats, SWEMU_SPIN_US="1")
    assert p.returncode == 0, p.stderr
    k = kernel(json.loads(stats.read_text()), "k_inflight")
    assert (k["races"], k["write_conflicts"], k["dma"]["get"]["ops"]) == (0, 0, 64 * 2 * rounds), p.stderr



def test_barriers_and_ldm_variables(good):
    ids = np.arange(64)
    row, col = ids // 8, ids % 8
    np.testing.assert_array_equal(good.res[:64], ((ids + 1) % 64 + 1) * 10)
    np.testing.assert_array_equal(good.res[64:128], (row * 8 + (col + 1) % 8) * 100 + 5)
    np.testing.assert_array_equal(good.res[128:], (((row + 1) % 8) * 8 + col) * 1000 + 3)
    np.testing.assert_array_equal(good.tl[:64], ids * 7)   # __thread_local / __ldm per CPE


def test_simd(good):
    ids = np.arange(64, dtype=np.float32)[:, None]
    got = good.out2[1024:1024 + 512].reshape(64, 8)
    np.testing.assert_array_equal(got[:, :4], np.array([1, 2, 3, 4], dtype=np.float32) * (ids + 1))
    np.testing.assert_array_equal(got[:, 4:7], np.hstack([10 * ids, 36 * ids, 28 + 8 * ids]))
    assert (got[:, 7] == 1).all()          # a stack array of cap/2 bytes is fine


# ---- BCAST_MODE (Athread v1) ----------------------------------------------------------------

v1_only = pytest.mark.parametrize("prog", ["sunway-emu"], indirect=True)


@pytest.fixture(scope="module")
def bcast(prog):
    """`prog bcast`: stats and the arrays the two BCAST_MODE kernels wrote."""
    stats, dump = prog.dir / "bcast_stats.json", prog.dir / "bcast.bin"
    p = run(prog, "bcast", dump, stats=stats)
    assert p.returncode == 0 and "swemu" not in p.stderr, p.stderr
    raw = dump.read_bytes()
    f = np.frombuffer(raw[: 3 * NF * 4], dtype=np.float32).reshape(3, NF)
    return SimpleNamespace(stats=json.loads(stats.read_text()), out=f[0], out2=f[1], out3=f[2],
                           res=np.frombuffer(raw[3 * NF * 4:], dtype=np.int32))


@v1_only
def test_bcast_row_masks_reach_every_cpe_of_the_row(bcast):
    a = np.arange(NF, dtype=np.float32)
    got = bcast.out.reshape(64, 64)
    for cpe in range(64):
        row = cpe // 8
        src = a[512 * row: 512 * row + 128]
        exp = src.reshape(8, 16)[:, :8].ravel() if row % 2 else src[:64]   # odd rows: strided
        np.testing.assert_array_equal(got[cpe], exp, err_msg=f"CPE {cpe}")
    # only the issuer's reply word grew
    issuers = [row * 8 + row % 8 for row in range(8)]
    np.testing.assert_array_equal(bcast.res[:64], [int(i in issuers) for i in range(64)])


@v1_only
def test_bcast_counts_one_op_and_len_bytes_on_the_issuer(bcast):
    k = kernel(bcast.stats, "k_bcast_row")   # 64 PE gets of 4 B + 8 broadcasts of 256 B
    assert k["dma"] == {"get": {"ops": 64 + 8, "bytes": 64 * 4 + 8 * 256},
                        "put": {"ops": 128, "bytes": 64 * (256 + 4)}}
    assert k["dma_hist"] == {"4": 128, "256": 64 + 8}
    assert (k["ldm_peak_bytes"], k["ldm_leaked_bytes"], k["write_conflicts"]) == (256, 0, 0)
    k = kernel(bcast.stats, "k_bcast_all")   # 2 broadcasts, 2 puts per CPE
    assert k["dma"] == {"get": {"ops": 2, "bytes": 256 + 64}, "put": {"ops": 128, "bytes": 64 * (256 + 64)}}
    assert k["dma_hist"] == {"64": 65, "256": 65}


@v1_only
def test_bcast_into_stack_and_ldm_variables(bcast):
    a = np.arange(NF, dtype=np.float32)
    np.testing.assert_array_equal(bcast.out2.reshape(64, 64), np.tile(a[1000:1064], (64, 1)))
    tlb = bcast.out3[:1024].reshape(64, 16)
    np.testing.assert_array_equal(tlb[:8], np.repeat(-np.arange(8, dtype=np.float32)[:, None], 16, 1))
    np.testing.assert_array_equal(tlb[8:], np.tile(a[2000:2016], (56, 1)))   # mask 0xfe: rows 1..7


@v1_only
@pytest.mark.parametrize("size", [0, 64])   # CPE 13 allocates nothing / a smaller block
def test_bcast_receiver_without_the_block(prog, size):
    line = fatal(prog, "bcastbad", size)
    assert re.match(r"swemu: error: kernel k_bcast_bad CPE 0: athread_get: BCAST_MODE destination "
                    r"0x[0-9a-f]+\.\.0x[0-9a-f]+ is not inside a live LDM block of receiving CPE 13 "
                    r"\(every receiver must have allocated the same buffer\)$", line), line


@v1_only
def test_bcast_mask_zero_and_other_modes(prog):
    assert re.match(r"swemu: error: kernel k_bcast_mask0 CPE \d+: athread_get: BCAST_MODE mask is 0",
                    fatal(prog, "bcastmask0"))
    assert re.match(r"swemu: error: kernel k_row_mode CPE \d+: athread_get: ROW_MODE is not emulated",
                    fatal(prog, "rowmode"))


# ---- fatal errors: exit 86, exactly one line ---------------------------------------------

def fatal(prog, *args, **env):
    p = run(prog, *args, **env)
    assert p.returncode == 86, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_ldm_overflow_heap(prog):
    h1, h2 = prog.cap * 5 // 8, prog.cap // 2
    line = fatal(prog, "heap", h1, h2)
    m = re.match(rf"swemu: error: kernel k_heap_over CPE (\d+): LDM overflow: requested {h2} bytes, "
                 rf"(\d+) in use, capacity {prog.cap} bytes", line)
    assert m, line
    assert 0 <= int(m.group(1)) < 64 and h1 <= int(m.group(2)) < h1 + 4096
    line = fatal(prog, "heap", prog.cap + 1, 64)
    assert re.match(rf"swemu: error: kernel k_heap_over CPE \d+: LDM overflow: requested {prog.cap + 1} bytes", line)
    assert run(prog, "heap", prog.cap // 4, prog.cap // 4).returncode == 0


def test_ldm_overflow_stack(prog):
    line = fatal(prog, "stack")
    assert re.match(r"swemu: error: kernel k_stack_over CPE \d+: LDM overflow: stack grew past \d+ bytes", line), line


@pytest.mark.parametrize("mode, what", [
    ("badmain", r"main-memory side 0x[0-9a-f]+\.\.0x[0-9a-f]+ is in CPE \d+'s LDM heap, not main memory"),
    ("badldm", r"LDM side 0x[0-9a-f]+\.\.0x[0-9a-f]+ is in main memory, not in this CPE's LDM"),
    ("badreply", r"reply word 0x[0-9a-f]+\.\.0x[0-9a-f]+ is in main memory, not in this CPE's LDM"),
    ("badlen", r"len 100 is not a multiple of bsize 32$"),
])
def test_dma_address_checks(prog, mode, what):
    line = fatal(prog, mode)
    assert re.match(rf"swemu: error: kernel k_{mode[:3]}_{mode[3:]} CPE \d+: {prog.dma}\w*: {what}", line), line


def test_ldm_free_size_mismatch(prog):
    assert re.match(r"swemu: error: kernel k_bad_free CPE \d+: ldm_free\(0x[0-9a-f]+, 128\): the block was "
                    r"allocated with 64 bytes", fatal(prog, "badfree"))


def test_deadlock_is_reported_not_hung(prog):
    line = fatal(prog, "deadlock")
    assert re.match(r"swemu: error: kernel k_deadlock CPE \d+: .*(can never complete|returned from the kernel while)", line), line


def test_misaligned_simd_load(prog):
    assert re.match(r"swemu: error: kernel k_misalign CPE \d+: simd_load: address 0x[0-9a-f]+ is not 16-byte aligned",
                    fatal(prog, "misalign"))


@pytest.mark.parametrize("prog", ["sunway-pro-emu"], indirect=True)   # CRTS_dma_wait_value is CRTS only
def test_wait_value_that_cannot_complete(prog):
    assert prog.api == "crts"
    assert re.match(r"swemu: error: kernel k_wait CPE \d+: CRTS_dma_wait_value: reply word is 1, waiting for 2",
                    fatal(prog, "wait"))


def test_spawn_rules(prog):
    assert fatal(prog, "twice") == \
        "swemu: error: athread_spawn(k_counts) while kernel k_sleep is still running (missing athread_join)"
    if prog.api == "athread":
        assert fatal(prog, "halted").startswith("swemu: error: athread_spawn(k_counts) after athread_halt()")
    else:                                   # CRTS: athread_halt is a no-op
        assert run(prog, "halted").returncode == 0


def test_join_timeout(prog):
    assert run(prog, "sleep").returncode == 0
    line = fatal(prog, "sleep", SWEMU_TIMEOUT="0.05")
    assert line.startswith("swemu: error: kernel k_sleep: still running after SWEMU_TIMEOUT=0.05 s (64 CPEs computing"), line


# ---- stats file -----------------------------------------------------------------------------

def test_conflict_tracking_can_be_disabled(prog, tmp_path):
    p = run(prog, "run", stats=tmp_path / "s.json", SWEMU_CONFLICTS="0")
    assert p.returncode == 0 and "swemu" not in p.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert kernel(s, "k_conflict")["write_conflicts"] == 0
    assert kernel(s, "k_conflict")["dma"]["put"]["ops"] == 64


def test_stats_written_at_exit_without_halt(prog, tmp_path):
    path = tmp_path / "s.json"
    assert run(prog, "nohalt", stats=path).returncode == 0
    s = json.loads(path.read_text())
    assert [k["name"] for k in s["kernels"]] == ["k_counts", "k_leak"]
    assert kernel(s, "k_counts")["dma"]["get"]["ops"] == 192


def test_stats_replaced_atomically(prog, tmp_path):
    path = tmp_path / "s.json"
    path.write_text("garbage that is not JSON")
    ino = path.stat().st_ino
    assert run(prog, "nohalt", stats=path).returncode == 0
    assert path.stat().st_ino != ino       # renamed into place, never rewritten in place
    json.loads(path.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
    assert run(prog, "nohalt").returncode == 0    # no SWEMU_STATS: nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


# ---- slavecc ------------------------------------------------------------------------------

def _nm(obj):
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    return {(ln.split()[-2], ln.split()[-1]) for ln in out.splitlines() if len(ln.split()) >= 2}


def test_slavecc_renames_defined_globals_only(prog):
    syms = _nm(prog.slave_o)
    assert ("T", "slave_k_counts") in syms and ("T", "slave_k_wait") in syms
    assert not any(name == "k_counts" for _, name in syms)
    assert ("U", prog.dma) in syms and ("U", "ldm_malloc") in syms   # references untouched
    assert any(name == "slave_mine" for _, name in syms)   # LDM (TLS) variable renamed too


def test_slavecc_errors_and_passthrough(tmp_path, capfd):
    bad = tmp_path / "bad.c"
    bad.write_text("int f(void) { return undeclared_thing; }\n")
    assert slavecc.main(["gcc", "-c", str(bad), "-o", str(tmp_path / "bad.o")]) != 0
    assert "undeclared_thing" in capfd.readouterr().err
    good = tmp_path / "g.c"
    good.write_text("int counter; static int hidden; int g(void) { return hidden + counter; }\n")
    # no -o: gcc writes g.o in the working directory
    p = subprocess.run([sys.executable, "-m", "swbuild.runtime.slavecc", "gcc", "-c", "g.c"], cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert p.returncode == 0
    names = {n for _, n in _nm(tmp_path / "g.o")}
    assert {"slave_g", "slave_counter", "hidden"} <= names and "g" not in names
    # -E produces no object: passes through untouched
    assert slavecc.main(["gcc", "-E", str(good), "-o", str(tmp_path / "g.i")]) == 0
    assert "hidden" in (tmp_path / "g.i").read_text()
