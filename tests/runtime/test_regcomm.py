"""Register communication on the emulated SW26010 (runtime/athread/src/regcomm.c): putr/getr
along a mesh row, putc/getc along a column, broadcast to the other 7, a receive buffer of the
toolchain's `regcomm_buffer_entries`. Clean kernels give the right values with exact message
counts; each rule the chip would break on (deadlock, a full buffer, unreceived messages,
bad destinations, unordered senders, a put to a CPE that returned) is one report."""
import json
import os
import re
import subprocess

import pytest

from swemu_build import build_program
from swbuild.config import toolchain


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return build_program("sunway-emu", tmp_path_factory.mktemp("regcomm"), "regcomm_host.c",
                         "regcomm_slave.c", "regcomm")


def run(exe, *kernels, mode="wait", **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env.update(SWEMU_DMA=mode, **extra)
    return subprocess.run([str(exe), *kernels], capture_output=True, text=True, env=env, timeout=60)


def report(exe, kernel):
    p = run(exe, kernel)
    assert p.returncode == 86, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("kernel, putr, getr, putc, getc", [
    # ring shift (1 put, 1 get), 8 row rounds (1 broadcast, 7 gets), 8 column rounds (same)
    ("k_rc_ok", 64 * 2, 64 * 8, 64, 64 * 7),
    ("k_rc_vector", 64, 64 * 7, 0, 0),    # 32-byte messages: one broadcast per CPE
    ("k_rc_flow", 640, 640, 0, 0),        # 10 messages each through a 4-deep buffer
    # 8 SUMMA steps: 8 row senders and 8 column senders of 1000 broadcasts, 7 receivers each
    ("k_rc_summa", 8 * 8 * 1000, 8 * 8 * 7 * 1000, 8 * 8 * 1000, 8 * 8 * 7 * 1000),
])
@pytest.mark.parametrize("mode", ["wait", "random:3", "issue"])
def test_clean_kernels_give_the_right_values_and_exact_counts(exe, tmp_path, kernel, putr, getr, putc, getc, mode):
    stats = tmp_path / "stats.json"
    p = run(exe, kernel, mode=mode, SWEMU_STATS=str(stats))
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")
    (k,) = json.loads(stats.read_text())["kernels"]
    assert k["regcomm"] == {"puts": putr + putc, "gets": getr + getc, "putr": putr, "getr": getr,
                            "putc": putc, "getc": getc}
    # the message ordered each CPE's DMA write before its neighbour's read: no race
    assert k["races"] == 0 and k["write_conflicts"] == 0


def test_a_message_put_before_the_write_does_not_order_it(exe, tmp_path):
    stats = tmp_path / "stats.json"
    p = run(exe, "k_rc_early", SWEMU_STATS=str(stats))
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"swemu: warning: kernel k_rc_early: race: 16384 bytes read by one CPE and written by "
                        r"another with no barrier between, first at 0x[0-9a-f]+ \(out\+\d+\) read by CPE \d+, "
                        r"written by CPE \d+\n", p.stderr), p.stderr
    (k,) = json.loads(stats.read_text())["kernels"]
    assert k["races"] == 16384 and k["regcomm"] == {"puts": 64, "gets": 64, "putr": 64, "getr": 64, "putc": 0,
                                                    "getc": 0}


def test_counts_add_up_over_spawns(exe, tmp_path):
    stats = tmp_path / "stats.json"
    p = run(exe, "k_rc_ok", "k_rc_ok", SWEMU_STATS=str(stats))
    assert p.returncode == 0, p.stderr
    (k,) = json.loads(stats.read_text())["kernels"]
    assert k["spawns"] == 2 and k["regcomm"] == {"puts": 2 * 64 * 3, "gets": 2 * 64 * 15, "putr": 2 * 64 * 2,
                                                 "getr": 2 * 64 * 8, "putc": 2 * 64, "getc": 2 * 64 * 7}


def test_modelled_clock_charges_each_put_and_the_latency_once(exe):
    """A stream of 10 messages: the sender spends regcomm_message_cycles per put, the receiver
    waits for the last one, which lands regcomm_latency_cycles after its put."""
    hw = toolchain.load("sunway-emu").hardware
    msg, lat = float(hw["regcomm_message_cycles"]), float(hw["regcomm_latency_cycles"])
    assert msg == 18.4       # the sourced rate (toolchains/sunway.toml, docs/sunway.md)
    out = run(exe, "k_rc_clock")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["clock", str(round(10 * msg)), str(round(10 * msg + lat))]


def test_get_nobody_sends_to_is_a_deadlock(exe):
    assert re.fullmatch(
        r"swemu: error: kernel k_rc_deadlock CPE 9: register communication deadlock: every CPE waits "
        r"or has returned \(CPE 9 in getc; the others in a barrier or returned\); the chip would hang",
        report(exe, "k_rc_deadlock"))


def test_full_buffers_everywhere_are_a_deadlock(exe):
    line = report(exe, "k_rc_full")
    assert re.fullmatch(r"swemu: error: kernel k_rc_full CPE \d+: register communication deadlock: every "
                        r"CPE waits or has returned \(CPE 0 in putr, CPE 1 in putr, .*, \.\.\.; the others in "
                        r"a barrier or returned\); the chip would hang", line), line


def test_message_never_received(exe):
    assert report(exe, "k_rc_unreceived") == (
        "swemu: error: kernel k_rc_unreceived CPE 1: returned from the kernel with 1 message(s) in its "
        "row receive buffer (the first from CPE 0) never taken by a getr: the next kernel's gets would read them")


def test_put_to_itself(exe):
    assert report(exe, "k_rc_self") == \
        "swemu: error: kernel k_rc_self CPE 3: putr: destination 3 is the sender itself"


def test_destination_out_of_range(exe):
    assert report(exe, "k_rc_dst") == ("swemu: error: kernel k_rc_dst CPE 3: putc: destination 9 is not a "
                                       "column position 0..7 or 8 (broadcast)")


def test_two_unordered_senders_into_one_buffer(exe):
    line = report(exe, "k_rc_unordered")
    m = re.fullmatch(r"swemu: error: kernel k_rc_unordered CPE (0|2): putr to CPE 1: CPE (0|2) also sends "
                     r"into its row buffer and nothing orders the two puts \(no barrier or message between "
                     r"them\): the order CPE 1 receives them in depends on timing on the chip", line)
    assert m and m[1] != m[2], line


def test_put_to_a_cpe_that_returned(exe):
    line = report(exe, "k_rc_gone")
    # CPE 1 returns at once: either it finds the message at its end, or the put finds it gone
    assert line in (
        "swemu: error: kernel k_rc_gone CPE 0: putr to CPE 1, which already returned from the kernel",
        "swemu: error: kernel k_rc_gone CPE 1: returned from the kernel with 1 message(s) in its row receive "
        "buffer (the first from CPE 0) never taken by a getr: the next kernel's gets would read them"), line


def test_a_check_compares_messages_with_the_plan(exe, tmp_path):
    """emulator_findings: messages the plan does not predict (a kernel without `regcomm` predicts
    none) are a mismatch, like DMA, per direction; predicted ones match."""
    from swbuild.backends.sunway.report import emulator_findings

    stats = tmp_path / "stats.json"
    assert run(exe, "k_rc_flow", SWEMU_STATS=str(stats)).returncode == 0
    st = json.loads(stats.read_text())
    (k,) = st["kernels"]
    entry = {"name": "k_rc_flow", "dma": {d: {x: k["dma"][d][x] for x in ("ops", "bytes")} for d in ("get", "put")}}
    (bad,) = emulator_findings({"kernels": [entry]}, st)["dma_mismatches"]
    flow = {"puts": 640, "gets": 640, "putr": 640, "getr": 640, "putc": 0, "getc": 0}
    assert bad["measured"]["regcomm"] == flow
    assert bad["predicted"]["regcomm"] == dict.fromkeys(flow, 0)
    ok = dict(entry, regcomm=flow)
    assert emulator_findings({"kernels": [ok]}, st)["dma_mismatches"] == []
    # the right total along the wrong direction is a mismatch too
    wrong = dict(entry, regcomm=dict(flow, putr=0, getr=0, putc=640, getc=640))
    assert len(emulator_findings({"kernels": [wrong]}, st)["dma_mismatches"]) == 1
