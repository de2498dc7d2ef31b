"""RMA on the emulated SW26010-Pro (runtime/athread/src/rma.c): CRTS_rma_iput / iget and the
row, column and array broadcasts, with reply words at the same LDM offset in every CPE. A
clean kernel using every form gives the right values with exact per-kernel counts; each rule
the chip would break on (a source written or a destination touched while in flight, a wait
no RMA can satisfy, RMA left unwaited at the kernel's end, a destination not allocated at the
receiver, ldm_free or DMA on a buffer in flight) is one report; the modelled clock charges
the toolchain's sourced cost."""
import json
import os
import re
import subprocess

import pytest

from swemu_build import build_program
from swbuild.config import toolchain

N = 256                 # floats per block (c/rma.h RMA_N)
BLOCK = 4 * N


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    return build_program("sunway-pro-emu", tmp_path_factory.mktemp("rma"), "rma_host.c", "rma_slave.c", "rma")


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


@pytest.mark.parametrize("mode", ["wait", "random:3", "issue"])
def test_every_form_gives_the_right_values_and_exact_counts(exe, tmp_path, mode):
    stats = tmp_path / "stats.json"
    p = run(exe, "k_rma_ok", mode=mode, SWEMU_STATS=str(stats))
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")
    (k,) = json.loads(stats.read_text())["kernels"]
    # a ring of 64 iputs and of 64 igets; 8 row, 8 column and 1 array broadcasts, each
    # landing in its 8, 8 and 64 members (the issuer included)
    ops = {"iput": 64, "iget": 64, "row_ibcast": 8, "col_ibcast": 8, "ibcast": 1}
    assert k["rma"] == dict(ops, bytes=BLOCK * sum(ops.values()),
                            recv_bytes=BLOCK * (64 + 64 + 8 * 8 + 8 * 8 + 64))
    # the broadcasts replaced DMA: 8 + 8 + 1 block gets, not one per CPE
    assert k["dma"]["get"] == {"ops": 17, "bytes": 17 * BLOCK}
    assert k["races"] == 0 and k["write_conflicts"] == 0


def test_source_written_in_flight(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_src_write CPE (\d+): CRTS_rma_row_ibcast by CPE \1: its source "
                        r"\(1024 bytes in CPE \1's LDM at 0x[0-9a-f]+\) was written while the RMA was in flight "
                        r"\(buffer reused before its reply wait\)", report(exe, "k_rma_src_write"))


def test_destination_written_before_it_landed(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_dst_early CPE 0: CRTS_rma_ibcast by CPE 0: its destination at "
                        r"0x[0-9a-f]+ \(1024 bytes\) was written at byte 20 before the RMA landed \(missing or "
                        r"misplaced CRTS_rma_wait_value\)", report(exe, "k_rma_dst_early"))


def test_waiting_for_more_replies_than_sent_is_a_deadlock(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_overwait CPE 9: register communication deadlock: every CPE "
                        r"waits or has returned \(CPE 9 in CRTS_rma_wait_value; the others in a barrier or "
                        r"returned\); the chip would hang", report(exe, "k_rma_overwait"))


def test_returning_with_an_rma_into_the_ldm_not_waited_for(exe):
    # CPE 10 returns first, or CPE 8 issues after it returned: either way one report
    assert re.fullmatch(r"swemu: error: kernel k_rma_unwaited CPE (10: returned from the kernel with "
                        r"CRTS_rma_row_ibcast by CPE 8 into its LDM never waited for \(CRTS_rma_wait_value on its "
                        r"reply word\)|8: CRTS_rma_row_ibcast to CPE 10, which already returned from the kernel)",
                        report(exe, "k_rma_unwaited"))


def test_destination_not_allocated_at_the_receiver(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_unalloc CPE 0: CRTS_rma_iput: destination at LDM offset 0 "
                        r"\(1024 bytes\) is not inside a live ldm_malloc block or the stack/static data of CPE 1 "
                        r"\(not allocated there yet\? nothing ordered its ldm_malloc before the RMA\)",
                        report(exe, "k_rma_unalloc"))


def test_freeing_a_source_in_flight(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_free CPE 0: ldm_free\(0x[0-9a-f]+\): CRTS_rma_row_ibcast by "
                        r"CPE 0 is still in flight in this block", report(exe, "k_rma_free"))


def test_broadcasting_a_buffer_with_dma_in_flight(exe):
    assert re.fullmatch(r"swemu: error: kernel k_rma_dma_src CPE (0|8|16|24|32|40|48|56): CRTS_rma_row_ibcast: "
                        r"source 0x[0-9a-f]+\.\.0x[0-9a-f]+ has DMA CRTS_dma_iget in flight on it \(wait for its "
                        r"reply first\)", report(exe, "k_rma_dma_src"))


def test_modelled_clock_charges_the_toolchain_cost(exe):
    """CPE 0 puts 2450 bytes to CPE 1: the issuer pays len / rma_bytes_per_cycle, the receiver
    sees the data rma_latency_cycles after that (toolchains/sunway-pro.toml, sourced)."""
    hw = toolchain.load("sunway-pro-emu").hardware
    p = run(exe, "k_rma_clock")
    assert p.returncode == 0, p.stderr
    sender, receiver = map(int, re.fullmatch(r"clock (\d+) (\d+)\n", p.stdout).groups())
    issue = 2450 / float(hw["rma_bytes_per_cycle"])
    assert (sender, receiver) == (round(issue), round(issue + float(hw["rma_latency_cycles"])))


def test_a_check_compares_rma_with_the_plan(exe, tmp_path):
    """emulator_findings: RMA the plan does not predict (a kernel without `rma` predicts none)
    is a mismatch, like DMA, per form; the predicted counts match."""
    from swbuild.backends.sunway.report import emulator_findings

    stats = tmp_path / "stats.json"
    assert run(exe, "k_rma_ok", SWEMU_STATS=str(stats)).returncode == 0
    st = json.loads(stats.read_text())
    (k,) = st["kernels"]
    entry = {"name": "k_rma_ok", "dma": {d: {x: k["dma"][d][x] for x in ("ops", "bytes")} for d in ("get", "put")}}
    (bad,) = emulator_findings({"kernels": [entry]}, st)["dma_mismatches"]
    assert bad["measured"]["rma"] == k["rma"] and bad["predicted"]["rma"] == {}
    assert emulator_findings({"kernels": [dict(entry, rma=k["rma"])]}, st)["dma_mismatches"] == []
    # the same bytes by another form are a mismatch too
    wrong = dict(k["rma"], iput=k["rma"]["iput"] - 1, iget=k["rma"]["iget"] + 1)
    assert len(emulator_findings({"kernels": [dict(entry, rma=wrong)]}, st)["dma_mismatches"]) == 1
