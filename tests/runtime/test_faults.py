"""The fault suite: one small kernel per rule the Athread emulator enforces (tests/runtime/c/
faults_slave.c), each run alone and its one-line report asserted; the clean kernel must
stay silent in every SWEMU_DMA mode.  One program per API and SWEMU_INSTRUMENT level holds all
kernels: "stores" (the default: plain stores checked), "1" (loads too), "0" (none: redzones)."""
import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from swbuild.config import toolchain
from swemu_build import build_program

C_DIR = Path(__file__).parent / "c"
HEX = r"0x[0-9a-f]+"


def build_faults(name, out, level="stores"):
    tc = toolchain.load(name)
    exe = build_program(name, out, "faults_host.c", "faults_slave.c", "faults", level)
    return SimpleNamespace(name=name, exe=exe, cap=int(tc.hardware["ldm_bytes"]), level=level,
                           get="athread_get" if tc.api == "athread" else "CRTS_dma_iget",
                           put="athread_put" if tc.api == "athread" else "CRTS_dma_iput",
                           wait="reply wait" if tc.api == "athread" else "CRTS_dma_wait_value")


_BUILDS = {}


def _faults(name, level, tmp_path_factory):
    """One program per (target, SWEMU_INSTRUMENT level), shared by the fixtures below."""
    key = (name, level)
    if key not in _BUILDS:
        _BUILDS[key] = build_faults(name, tmp_path_factory.mktemp(name), level)
    return _BUILDS[key]


@pytest.fixture(scope="module", params=[("sunway-emu", "stores"), ("sunway-pro-emu", "stores"),
                                        ("sunway-emu", "1"), ("sunway-pro-emu", "1")],
                ids=["v1", "crts", "v1-loads", "crts-loads"])
def fp(request, tmp_path_factory):
    """The default builds (plain stores checked) and SWEMU_INSTRUMENT=1 ones (loads too)."""
    return _faults(*request.param, tmp_path_factory)


@pytest.fixture(scope="module", params=[("sunway-emu", "0"), ("sunway-pro-emu", "0")], ids=["v1", "crts"])
def fp0(request, tmp_path_factory):
    """SWEMU_INSTRUMENT=0 builds: no access checks, redzones and page protection only."""
    return _faults(*request.param, tmp_path_factory)


def run(fp, *kernels, mode="wait", **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env.update(SWEMU_DMA=mode, **extra)
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
    # the arena is twice the modelled LDM (redzones): the store lands past the block's redzone
    assert re.fullmatch(rf"swemu: error: kernel k_past_ldm CPE \d+: store to LDM {HEX}: {fp.cap // 2} bytes "
                        rf"past the end of ldm_malloc block {HEX} of {fp.cap // 2} bytes", report(fp, "k_past_ldm"))


def test_store_into_another_cpes_ldm(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_other_ldm CPE 1: store to {HEX} in the LDM of CPE 0: "
                        r"another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fp, "k_other_ldm"))


def test_dma_overrunning_a_stack_array(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_stack_overrun CPE \d+: {fp.get}: LDM side {HEX}\.\.{HEX} "
                        r"starts in a local array on the LDM stack and runs \d+ bytes past the kernel's "
                        r"frames \(longer than the array\?\)", report(fp, "k_stack_overrun"))


def test_misaligned_vector_dereference(fp):
    if fp.level == "1":
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


def test_chain_of_row_and_column_barriers_orders_accesses(fp):
    p = run(fp, "k_race_chain", "k_race_chain")
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_row_barrier_does_not_order_another_row(fp):
    p = run(fp, "k_race_row")
    assert (p.returncode, p.stdout) == (0, "ok\n"), p.stderr
    assert re.fullmatch(rf"swemu: warning: kernel k_race_row: race: 16384 bytes read by one CPE and written by "
                        rf"another with no barrier between, first at {HEX} \(out\+0\) read by CPE 55, "
                        r"written by CPE 0\n", p.stderr)


# ---- plain stores (default builds) and loads (SWEMU_INSTRUMENT=1) ------------------------------

def test_plain_store_into_another_cpes_live_block(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_other CPE 1: store to {HEX} in the LDM of CPE 0: "
                        r"another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fp, "k_plain_other"))


def test_plain_store_into_another_cpes_stack(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_other_stack CPE 1: store to {HEX} in the LDM stack of "
                        r"CPE 0: another CPE's LDM is not addressable \(SW26010: register communication; "
                        r"SW26010-Pro: RMA\)", report(fp, "k_plain_other_stack"))


def test_plain_store_just_past_a_block(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_plain_past CPE \d+: store to LDM {HEX}: 16 bytes past the end "
                        rf"of ldm_malloc block {HEX} of 64 bytes", report(fp, "k_plain_past"))


def test_direct_stores_of_64_cpes_to_one_word(fp):
    p = run(fp, "k_direct_same_word")
    assert p.returncode == 0
    assert re.fullmatch(rf"swemu: warning: kernel k_direct_same_word: 4 write conflicts, first at {HEX} "
                        r"\(out\+0\) by CPE 0 and 1\n", p.stderr), p.stderr


def test_direct_stores_ordered_by_a_barrier_stay_silent(fp):
    p = run(fp, "k_direct_ok", "k_direct_ok")
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_fast_mode_drops_plain_access_checks_and_says_so(fp, tmp_path):
    stats = tmp_path / "stats.json"
    p = run(fp, "k_plain_other", "k_direct_same_word", SWEMU_CHECKS="fast", SWEMU_STATS=str(stats))
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
    doc = json.loads(stats.read_text())
    assert doc["checks"] == "fast"
    assert [d.split(" (")[0] for d in doc["checks_dropped"]] == [
        "page protection of LDM buffers with DMA in flight", "checks of plain loads and stores"]


def test_plain_load_just_past_a_block(fp):
    p = run(fp, "k_load_past")
    if fp.level == "stores":   # loads need SWEMU_INSTRUMENT=1: by default it reads redzone bytes, silently
        assert (p.returncode, p.stderr) == (0, ""), p.stderr
    else:
        assert re.fullmatch(rf"swemu: error: kernel k_load_past CPE \d+: load from LDM {HEX}: 16 bytes past the "
                            rf"end of ldm_malloc block {HEX} of 64 bytes", report(fp, "k_load_past"))


def test_direct_read_of_a_word_another_cpe_writes(fp):
    p = run(fp, "k_direct_race")
    assert p.returncode == 0
    if fp.level == "stores":   # direct loads join the race check with SWEMU_INSTRUMENT=1 only
        assert p.stderr == ""
    else:
        assert re.fullmatch(rf"swemu: warning: kernel k_direct_race: race: 256 bytes read by one CPE and written "
                            rf"by another with no barrier between, first at {HEX} \(out\+0\) read by CPE 63, "
                            r"written by CPE 0\n", p.stderr), p.stderr


# ---- redzones after ldm_malloc blocks (SWEMU_INSTRUMENT=0; instrumented builds see the store) ---

def redzone(kernel, size, heap_off, past, value, when):
    return (rf"swemu: error: kernel {kernel} CPE \d+: store past the end of ldm_malloc block {HEX} of "
            rf"{size} bytes \(heap offset {heap_off}\): LDM {HEX}, {past} bytes past its end, holds "
            rf"{value}, not the redzone's 0xfd \(found at {when}\)")


def test_redzone_store_found_at_ldm_free(fp0):
    assert re.fullmatch(redzone("k_rz_free", 128, 0, 4, "0x07", "ldm_free"), report(fp0, "k_rz_free"))


def test_redzone_store_seen_at_the_store_when_instrumented(fp):
    assert re.fullmatch(rf"swemu: error: kernel k_rz_free CPE \d+: store to LDM {HEX}: 4 bytes past the end "
                        rf"of ldm_malloc block {HEX} of 128 bytes", report(fp, "k_rz_free"))


def test_redzone_store_found_at_dma(fp0):
    assert re.fullmatch(redzone("k_rz_dma", 64, 0, 0, "0x00", fp0.get), report(fp0, "k_rz_dma"))


def test_redzone_store_found_at_barrier(fp0):
    sync = "athread_syn" if fp0.get == "athread_get" else "CRTS_ssync_array"
    assert re.fullmatch(redzone("k_rz_sync", 64, 0, 4, "0x(00|80|3f)", sync), report(fp0, "k_rz_sync"))


def test_redzone_store_found_at_kernel_end(fp0):
    assert re.fullmatch(redzone("k_plain_past", 64, 0, 16, "0x00", "kernel end"), report(fp0, "k_plain_past"))


def test_uninstrumented_build_misses_plain_stores_into_another_cpes_block(fp0):
    # SWEMU_INSTRUMENT=0 trades these for speed: the CPEs are threads in one address space
    for k in ("k_plain_other", "k_direct_same_word"):
        p = run(fp0, k)
        assert (p.returncode, p.stderr) == (0, ""), (k, p.stderr)


def test_blocks_filling_the_ldm_stay_silent(fp):
    p = run(fp, "k_clean", "k_rz_exact")
    assert (p.returncode, p.stdout, p.stderr) == (0, "ok\n", "")


def test_clean_kernels_silent_without_instrumentation(fp0):
    p = run(fp0, "k_clean", "k_rz_exact", "k_direct_ok")
    assert (p.returncode, p.stderr) == (0, ""), p.stderr
