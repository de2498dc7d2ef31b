"""The fault suite: one small kernel per rule the Athread emulator enforces (tests/runtime/c/
faults_slave.c), each run alone and its one-line report asserted; the clean kernel must
stay silent in every SWEMU_DMA mode.  One program per API holds all kernels."""
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from swbuild import build, toolchain

C_DIR = Path(__file__).parent / "c"
HEX = r"0x[0-9a-f]+"


def build_faults(name, out, instrument=False):
    tc = toolchain.load(name)
    steps, lib = build.runtime_steps(tc, out)
    extra = {"host": [], "slave": toolchain.SWEMU_INSTRUMENT_FLAGS if instrument else []}
    flags = lambda side: (list(tc.flags[side]) + extra[side] + ["-Wall", "-Werror"]
                          + sum((["-I", str(i)] for i in tc.runtime_include_dirs()), [])
                          + [f"-D{d}" for d in tc.runtime_defines()] + ["-I", str(C_DIR)])
    h, s, exe = out / "fh.o", out / "fs.o", out / "faults"
    steps += [
        build.Step("host", tc.argv("host_cc") + flags("host") + ["-c", str(C_DIR / "faults_host.c"), "-o", str(h)], [], [h]),
        build.Step("slave", tc.argv("slave_cc") + flags("slave") + ["-c", str(C_DIR / "faults_slave.c"), "-o", str(s)], [], [s]),
        build.Step("link", tc.argv("link") + tc.flags["link"] + [str(h), str(s), str(lib)] + tc.flags["libs"] + ["-o", str(exe)], [], [exe]),
    ]
    build.run_steps(steps, log=lambda *a: None)
    return SimpleNamespace(name=name, exe=exe, cap=int(tc.hardware["ldm_bytes"]), instrumented=instrument,
                           get="athread_get" if tc.api == "athread" else "CRTS_dma_iget",
                           put="athread_put" if tc.api == "athread" else "CRTS_dma_iput",
                           wait="reply wait" if tc.api == "athread" else "CRTS_dma_wait_value")


@pytest.fixture(scope="module", params=[("sunway-emu", False), ("sunway-pro-emu", False),
                                        ("sunway-emu", True), ("sunway-pro-emu", True)],
                ids=["v1", "crts", "v1-instrumented", "crts-instrumented"])
def fp(request, tmp_path_factory):
    name, instrument = request.param
    return build_faults(name, tmp_path_factory.mktemp(name), instrument)


@pytest.fixture
def fpi(fp):
    if not fp.instrumented:
        pytest.skip("plain loads and stores are checked in instrumented builds (SWEMU_INSTRUMENT=1)")
    return fp


def run(fp, *kernels, mode="wait"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env["SWEMU_DMA"] = mode
    return subprocess.run([str(fp.exe), *kernels], capture_output=True, text=True, env=env, timeout=60)


def report(fp, kernel, mode="wait"):
    p = run(fp, kernel, mode=mode)
    assert p.returncode == 86, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def xfer(op, n, length, arrow, block):
    return (rf"{op} #{n} \({length} bytes, main memory {HEX}\.\.{HEX} {arrow} LDM {HEX} in "
            rf"ldm_malloc block {HEX} of {block} bytes, byte 0\)")


@pytest.mark.parametrize("mode", ["issue", "wait", "random:1", "random:7"])
def test_clean_kernel_is_silent_and_right_in_every_mode(fp, mode):
    p = run(fp, "k_clean", "k_clean", mode=mode)
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_bad_mode_is_refused(fp):
    assert report(fp, "k_clean", mode="later") == \
        "swemu: error: SWEMU_DMA=later: expected issue, wait, random or random:SEED"


# ---- asynchronous DMA ----------------------------------------------------------------------

def test_read_before_wait(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_read_early CPE \d+: load from LDM {HEX} \(ldm_malloc block {HEX} "
        rf"of 256 bytes, byte 12\) before DMA {xfer(fp.get, 1, 256, '->', 256)} into it landed "
        r"\(missing or misplaced reply wait\)", report(fp, "k_read_early"))


def test_second_get_into_a_buffer_in_flight(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_reuse CPE \d+: DMA {xfer(fp.get, 2, 256, '->', 256)} uses LDM bytes "
        rf"that DMA {xfer(fp.get, 1, 256, '->', 256)}, still in flight, writes \(buffer reused before "
        r"its reply wait\)", report(fp, "k_reuse"))


def test_put_source_overwritten_in_flight(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_put_src CPE \d+: store to LDM {HEX} \(ldm_malloc block {HEX} of 256 "
        rf"bytes, byte 20\) while DMA {xfer(fp.put, 1, 256, '<-', 256)} reading it is in flight "
        r"\(buffer reused before its reply wait\)", report(fp, "k_put_src"))


def test_never_waited_is_reported_at_kernel_end(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_no_wait CPE \d+: returned from the kernel with 1 DMA transfer\(s\) "
        rf"never waited for; the first: {xfer(fp.get, 1, 256, '->', 256)}", report(fp, "k_no_wait"))


def test_stack_destination_written_in_flight(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_stack_early CPE \d+: LDM {HEX} was written while DMA {fp.get} #1 "
        rf"\(256 bytes, main memory {HEX}\.\.{HEX} -> LDM {HEX} in a local array on the LDM stack\) "
        r"into it was in flight \(buffer reused before its reply wait\)", report(fp, "k_stack_early"))


def test_wait_that_cannot_complete(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_wait_past CPE \d+: {fp.wait}: reply word is 2, waiting for 3, and "
        r"no DMA is in flight: the chip would wait forever", report(fp, "k_wait_past"))


def test_free_with_dma_in_flight(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_free_in_flight CPE \d+: ldm_free\({HEX}\): DMA "
        rf"{xfer(fp.get, 1, 64, '->', 64)} is still in flight in this block", report(fp, "k_free_in_flight"))


def test_get_of_memory_a_put_in_flight_writes(fp):
    assert re.fullmatch(
        rf"swemu: error: kernel k_put_then_get CPE \d+: DMA {fp.get} #2 .* touches main memory that "
        rf"DMA {fp.put} #1 .*, still in flight, writes \(their order is undefined until a reply wait\)",
        report(fp, "k_put_then_get"))


def test_async_faults_are_invisible_when_dma_lands_at_issue(fp):
    # the chip's best case: the same kernels run (the data happens to be there)
    for k in ["k_read_early", "k_reuse", "k_no_wait", "k_put_src"]:
        p = run(fp, k, mode="issue")
        assert (p.returncode, p.stderr) == (0, ""), (k, p.stderr)


def test_dma_from_outside_every_array(fp):
    assert report(fp, "k_wild_mem").endswith(
        f": {fp.get}: main memory 0x10000 is not mapped: the DMA's main-memory side lies outside every array")


# ---- LDM ------------------------------------------------------------------------------------

def test_heap_plus_stack_overflow(fp):
    m = re.fullmatch(rf"swemu: error: kernel k_heap_stack CPE \d+: LDM overflow: stack grew past (\d+) "
                     rf"bytes \(local arrays too large\?\): heap (\d+), static LDM data \d+ bytes, "
                     rf"capacity {fp.cap} bytes", report(fp, "k_heap_stack"))
    assert m and int(m.group(2)) == fp.cap // 4 * 3 and int(m.group(1)) + int(m.group(2)) > fp.cap


def test_store_past_an_ldm_malloc_block(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_past_block CPE \d+: store to LDM {HEX}: 8128 bytes "
                        rf"past the end of ldm_malloc block {HEX} of 64 bytes", report(fp, "k_past_block"))


def test_store_past_the_ldm(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_past_ldm CPE \d+: store to {HEX}: 0 bytes past the "
                        rf"end of the {fp.cap}-byte LDM", report(fp, "k_past_ldm"))


def test_store_into_another_cpes_ldm(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_other_ldm CPE 1: store to {HEX} in the LDM of CPE 0: "
                        r"another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fp, "k_other_ldm"))


def test_dma_overrunning_a_stack_array(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_stack_overrun CPE \d+: {fp.get}: LDM side {HEX}\.\.{HEX} "
                        r"starts in a local array on the LDM stack and runs \d+ bytes past the kernel's "
                        r"frames \(longer than the array\?\)", report(fp, "k_stack_overrun"))


def test_misaligned_vector_dereference(fp):
    if fp.instrumented:
        assert re.fullmatch(rf"swemu: error: kernel k_vec_misalign CPE \d+: load of a 16-byte vector at {HEX}: "
                            r"not 16-byte aligned \(a vector pointer such as \*\(floatv4 \*\)\(b \+ 1\)\?\)",
                            report(fp, "k_vec_misalign"))
    else:
        assert re.fullmatch(rf"swemu: error: kernel k_vec_misalign CPE \d+: general-protection fault at pc "
                            rf"{HEX}: a misaligned vector access .*", report(fp, "k_vec_misalign"))


# ---- the toolchain file's dma_align_bytes = 4 ------------------------------------------------

@pytest.mark.parametrize("kernel, what, length, mem, ldm", [
    ("k_len3", "len", 3, 0, 0), ("k_mem_off1", "main-memory address", 16, 1, 0),
    ("k_ldm_off1", "LDM address", 16, 0, 1)])
def test_dma_alignment_rule(fp, kernel, what, length, mem, ldm):
    line = report(fp, kernel, mode="issue")
    m = re.fullmatch(rf"swemu: error: kernel {kernel} CPE \d+: {fp.get}: {what} is not a multiple of "
                     rf"dma_align_bytes = 4 \(len {length}, main memory ({HEX}), LDM ({HEX}), bsize 0, "
                     r"stride 0\)", line)
    assert m, line
    assert (int(m.group(1), 16) % 4, int(m.group(2), 16) % 4) == (mem, ldm)


# ---- races between CPEs in one spawn --------------------------------------------------------

def test_dma_race_is_warned_with_the_array_name(fp):
    p = run(fp, "k_race")
    assert (p.returncode, p.stdout) == (0, "ok\n"), p.stderr
    assert re.fullmatch(rf"swemu: warning: kernel k_race: race: 16384 bytes read by one CPE and written by "
                        rf"another with no barrier between, first at {HEX} \(out\+0\) read by CPE 63, "
                        r"written by CPE 0\n", p.stderr)


def test_barrier_orders_the_same_accesses(fp):
    p = run(fp, "k_race_ok", "k_race_ok")
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


# ---- plain loads and stores (instrumented builds) --------------------------------------------

def test_plain_store_into_another_cpes_live_block(fpi):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_other CPE 1: store to {HEX} in the LDM of CPE 0: "
                        r"another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fpi, "k_plain_other"))


def test_plain_store_into_another_cpes_stack(fpi):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_other_stack CPE 1: store to {HEX} in the LDM stack of "
                        r"CPE 0: another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fpi, "k_plain_other_stack"))


def test_plain_store_just_past_a_block(fpi):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_past CPE \d+: store to LDM {HEX}: 16 bytes past the end "
                        rf"of ldm_malloc block {HEX} of 64 bytes", report(fpi, "k_plain_past"))


def test_direct_stores_of_64_cpes_to_one_word(fpi):
    p = run(fpi, "k_direct_same_word")
    assert p.returncode == 0
    assert re.fullmatch(rf"swemu: warning: kernel k_direct_same_word: 4 write conflicts, first at {HEX} "
                        r"\(out\+0\) by CPE 0 and 1\n", p.stderr), p.stderr


def test_direct_read_of_a_word_another_cpe_writes(fpi):
    p = run(fpi, "k_direct_race")
    assert p.returncode == 0
    assert re.fullmatch(rf"swemu: warning: kernel k_direct_race: race: 256 bytes read by one CPE and written by "
                        rf"another with no barrier between, first at {HEX} \(out\+0\) read by CPE 63, written "
                        r"by CPE 0\n", p.stderr), p.stderr
