"""Fault suite of the BANG emulator (tests/bang/faults.mlu): per declared buffer and per
cnrtMalloc block bounds, host pointers, __memcpy_async completion, overlapping NRAM copies,
tasks writing the same GDRAM bytes, the stack counted in NRAM; the clean kernel stays
silent and right."""
import re

import pytest

from bangemu_build import run

PTR = r"0x[0-9a-f]+"


def line(builds, case):
    r = run(builds["faults"], case, check=False)
    assert r.returncode == 87, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_clean_kernel_is_silent_and_right(builds):
    r = run(builds["faults"], "clean")
    assert (r.stdout, r.stderr) == ("ok\n", "")


def test_copy_past_its_buffer_into_the_neighbour(builds):
    assert re.fullmatch(r"bangemu: error: kernel buf_overrun task 0: __memcpy: dst must stay inside its buffer "
                        r"(na|nb) \(dst=NRAM\+0, bytes=8192, \1 holds 4096 B from NRAM\+0\)",
                        line(builds, "buf_overrun"))


@pytest.mark.parametrize("case, what", [("gdram_before", "src"), ("gdram_after", "dst"), ("host_ptr", "src")])
def test_gdram_operand_outside_every_cnrtmalloc_block(builds, case, what):
    assert re.fullmatch(rf"bangemu: error: kernel {case} task 0: __memcpy: {what} must be device memory "
                        rf"\(inside a cnrtMalloc block\) \({what}={PTR} is in no cnrtMalloc block: a host pointer\?\)",
                        line(builds, case))


def test_memcpy_async_never_synced(builds):
    assert line(builds, "async_no_sync") == (
        "bangemu: error: kernel async_no_sync task 0: __memcpy_async: every copy must be completed by "
        "__sync_io before the kernel ends (1 copies in flight, the first #1 GDRAM2NRAM)")


def test_memcpy_async_destination_read_before_sync(builds):
    assert re.fullmatch(r"bangemu: error: kernel async_early task 0: __bang_add: src0 reads the destination of "
                        r"__memcpy_async #1 \(GDRAM2NRAM\) before __sync_io \(src0=NRAM\+\d+, bytes=512\)",
                        line(builds, "async_early"))


def test_memcpy_async_source_overwritten_before_sync(builds):
    assert re.fullmatch(r"bangemu: error: kernel async_src task 0: __bang_write_zero: dst overwrites the source "
                        r"of __memcpy_async #1 \(NRAM2GDRAM\) before __sync_io \(dst=NRAM\+\d+, bytes=512\)",
                        line(builds, "async_src"))


def test_overlapping_nram_to_nram_copy(builds):
    assert re.fullmatch(r"bangemu: error: kernel n2n_overlap task 0: __memcpy: NRAM2NRAM source and destination "
                        r"must not overlap \(dst=NRAM\+(\d+), src=NRAM\+(\d+), bytes=256\)",
                        line(builds, "n2n_overlap"))


def test_tasks_writing_the_same_gdram_bytes(builds, tmp_path):
    r = run(builds["faults"], "task_conflict", stats=tmp_path / "s.json")
    assert re.fullmatch(rf"bangemu: warning: kernel task_conflict: 256 bytes of GDRAM written by more than one "
                        rf"task between the same barriers, first at GDRAM block {PTR}\+0 by task 0 and 1\n", r.stderr)
    import json
    k = json.loads((tmp_path / "s.json").read_text())["kernels"][0]
    assert (k["name"], k["write_conflicts"], k["violations"]) == ("task_conflict", 256, 0)


def test_big_local_array_is_counted_in_nram(builds):
    assert line(builds, "local_array") == (
        "bangemu: error: kernel local_array task 0: stack: local arrays live in NRAM and need more than the "
        "647168 B left by the __nram__ declarations (declared=8192 B, capacity=655360 B)")


def test_gdram_rules_hold_when_the_toolchain_states_them(builds):
    r = run(builds["faults"], "gdram_misaligned")           # diannao.toml states no GDRAM rule
    assert (r.returncode, r.stderr) == (0, "")
    assert re.fullmatch(rf"bangemu: error: kernel gdram_misaligned task 0: __memcpy: GDRAM operands must be 64-B "
                        rf"aligned \(src=GDRAM block {PTR}\+4\)", line({"faults": builds["faults_gdram"]}, "gdram_misaligned"))
    assert line({"faults": builds["faults_gdram"]}, "gdram_odd_size") == (
        "bangemu: error: kernel gdram_odd_size task 0: __memcpy: GDRAM copy size must be a multiple of 64 B "
        "(GDRAM2NRAM, size=100)")
