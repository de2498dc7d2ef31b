"""Fault suite of the BANG emulator (tests/bang/faults.mlu): per declared buffer and per
cnrtMalloc block bounds, plain stores past a buffer (redzones), host pointers, __memcpy_async completion, overlapping NRAM copies,
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


@pytest.mark.parametrize("case, at, buf, how, byte, size, start", [
    ("plain_past", "kernel end", "na", "past its end", "na+4096", 4096, 0),
    ("plain_before", "kernel end", "na", "before its start", "na-4", 4096, 0),
    ("plain_sync", "__sync_io", "nb", "past its end", "nb+4120", 4096, 4096),
    ("plain_memcpy", "__memcpy", "na", "past its end", "na+4159", 4096, 0),
    ("plain_into_next", "kernel end", "na", "past its end", "na+4096", 4096, 0),
    ("plain_local", "__memcpy", "plain_local(float*)::loc", "past its end", "plain_local(float*)::loc+64", 64, 8192),
    # the program's last NRAM buffer: caught by the redzone opening the next section
    ("plain_last", "__memcpy", "nlast", "past its end", "nlast+256", 256, 8256),
])
def test_plain_store_outside_its_buffer(builds, case, at, buf, how, byte, size, start):
    """Offsets leave the redzones out: nb starts at NRAM+4096 right after na's 4096 B."""
    assert line(builds, case) == (
        f"bangemu: error: kernel {case} task 0: {at}: plain stores must stay inside their NRAM buffer: "
        f"{buf} was written {how} (first bad byte {byte}, {buf} holds {size} B from NRAM+{start})")


def test_intrinsic_operand_starting_in_a_redzone(builds):
    assert line(builds, "gap_operand") == (
        "bangemu: error: kernel gap_operand task 0: __memcpy: dst must start inside a declared NRAM buffer "
        "(dst=NRAM+0 is between buffers)")


def test_buffers_used_exactly_to_their_end_are_silent(builds, tmp_path):
    r = run(builds["faults"], "clean_exact", stats=tmp_path / "s.json")
    assert (r.stdout, r.stderr) == ("ok\n", "")
    import json
    st = json.loads((tmp_path / "s.json").read_text())
    # redzones are not declared memory: na, nb, loc, nlast
    assert st["nram_declared_bytes"] == 4096 + 4096 + 64 + 256
    assert st["kernels"][0]["nram_peak_bytes"] == 4096


def test_plain_store_reported_once_with_continue(builds):
    r = run(builds["faults"], "plain_into_next", cont=True, check=False)
    assert r.returncode == 0 and r.stderr.count("bangemu: error:") == 1, r.stderr


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


STACK = ("stack: the kernel's frames and local arrays live in NRAM and need more than the {room} B it has there "
         "(nram_bytes=786432 B - declared={declared} B of __nram__ declarations, cncc's stack reserve "
         "nram_reserve_bytes=131072 B included; the emulator's own frames are not charged)")


def test_big_local_array_is_counted_in_nram(builds):
    assert line(builds, "local_array") == "bangemu: error: kernel local_array task 0: " + \
        STACK.format(room=786432 - 8512, declared=8512)


def test_conv_kernel_with_nram_nearly_full_runs_clean(builds):
    # vit_b_16's first conv on diannao-emu: declarations leave 1 KB of the capacity and the
    # kernel has no local array; its frames live in the 128 KB cncc keeps for the stack
    r = run(builds["stack"], "conv", check=False)
    assert (r.returncode, r.stderr) == (0, "")
    r = run(builds["stack"], "local", "100", check=False)       # 100 KB of local array: fits the reserve
    assert (r.returncode, r.stderr) == (0, "")
    r = run(builds["stack"], "local", "200", check=False)       # 200 KB: more than the chip has
    assert r.returncode == 87 and r.stderr == "bangemu: error: kernel local task 0: " + \
        STACK.format(room=786432 - 654336, declared=654336) + "\n"


def test_gdram_rules_hold_when_the_toolchain_states_them(builds):
    r = run(builds["faults"], "gdram_misaligned")           # diannao.toml states no GDRAM rule
    assert (r.returncode, r.stderr) == (0, "")
    assert re.fullmatch(rf"bangemu: error: kernel gdram_misaligned task 0: __memcpy: GDRAM operands must be 64-B "
                        rf"aligned \(src=GDRAM block {PTR}\+4\)", line({"faults": builds["faults_gdram"]}, "gdram_misaligned"))
    assert line({"faults": builds["faults_gdram"]}, "gdram_odd_size") == (
        "bangemu: error: kernel gdram_odd_size task 0: __memcpy: GDRAM copy size must be a multiple of 64 B "
        "(GDRAM2NRAM, size=100)")
