"""Per-channel epilogue operands read by __bang_cycle_* instead of replicated over the tile
(schedule/cycle_ops.py, option cycle_ops, issue 36). A per-channel QDQ convolution (bias and
per-channel requantization multipliers): with the option its epilogue reads one row of Cob
channels through cycle instructions, and the doubling NRAM2NRAM copies of replicate.py are gone;
the output is onnxruntime's bytes either way, the vector work is the same, and the emulator's
synchronous copy cycles fall by exactly the copies' cost (bangemu/memcpy.h's formula)."""
import re
import sys
from pathlib import Path

import pytest

from dn_build import checked_variants
from test_integer_conv import _conv64
from swbuild.backends.diannao.schedule.cycle_ops import cycle_form, cyclable
from swbuild.backends.diannao.schedule.replicate import copies_needed
from swbuild.backends.diannao.devir import SLoop, Stmt
from swbuild.ir.loopnest import Acc, Bin, Const, Load, Un, Var, iconst

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from quant_models import ort_quantized  # noqa: E402

HW = {"vector_size_multiple_bytes": 128}


def _kernel_schedules(plan):
    return [s for k in plan["kernels"] for s in k.get("kernels", [k]) if s.get("op") == "QLinearConv"]


@pytest.fixture(scope="module")
def variants(tc, tmp_path_factory):
    m = ort_quantized(tmp_path_factory.mktemp("q"), model=_conv64(), activations="QInt8")
    return checked_variants(tc, tmp_path_factory, m, "cyc", {"on": {}, "off": {"cycle_ops": "off"}}, 3, 0, 0)


def test_cycle_instructions_replace_the_replication_bit_exact(variants, tc):
    on, off = variants["on"], variants["off"]
    for plan, doc, stats, _ in (on, off):
        assert doc["status"] == "pass", doc.get("reason")
        assert doc["max_abs_err"] == 0 and stats["violations"] == 0
        assert doc["emulator"]["copy_mismatches"] == [] and doc["emulator"]["write_conflicts"] == 0
    src_on, src_off = on[3], off[3]
    assert "__bang_cycle_mul(" in src_on and "NRAM2NRAM" not in src_on
    assert "__bang_cycle_" not in src_off and "NRAM2NRAM" in src_off
    # the cycle calls: elem_count = the tile's lanes, cycle_count = Cob
    (sched,) = [s["schedule"] for s in _kernel_schedules(on[0])]
    calls = re.findall(r"__bang_cycle_\w+\([^;]*, (\d+), (\d+)\);", src_on)
    assert calls and {int(c) for _, c in calls} == {sched["Cob"]}
    assert all(int(n) % sched["Cob"] == 0 for n, _ in calls)


def _sum(stats, pred):
    return sum(v for k in stats["kernels"] for n, v in k.get("instruction_cycles", {}).items() if pred(n))


def test_same_vector_work_and_the_copies_cost_saved(variants, tc):
    hw = tc.hardware
    (_, _, s_on, _), (plan_off, _, s_off, _) = variants["on"], variants["off"]
    vec = lambda n: n.startswith("__bang_") and n != "__bang_conv"     # noqa: E731
    assert _sum(s_on, vec) == _sum(s_off, vec)          # a cycle op costs the plain op of its length
    (k_on,), (k_off,) = s_on["kernels"], s_off["kernels"]
    assert "NRAM2NRAM" not in k_on["memcpy_bytes"]
    assert k_on["memcpy_bytes"]["GDRAM2NRAM"] == k_off["memcpy_bytes"]["GDRAM2NRAM"]   # the row of Cob still loaded once
    # the doubling copies: per replicated block, copies_needed(pixels) per per-channel operand (2),
    # together (pixels - 1) rows of Cob floats each
    (sched,) = [s["schedule"] for s in _kernel_schedules(plan_off)]
    pixels, cob = sched["R"] * 16, sched["Cob"]
    copies = k_off["instructions"]["__memcpy"] - k_on["instructions"]["__memcpy"]
    moved = k_off["memcpy_bytes"]["NRAM2NRAM"]
    assert copies > 0 and copies % (2 * copies_needed(pixels)) == 0
    assert moved == copies // copies_needed(pixels) * (pixels - 1) * cob * 4
    # each a contiguous NRAM2NRAM copy of whole 128-B chunks: start-up + bytes / nram_bytes_per_cycle
    assert cob * 4 % hw["nram_bytes_per_cycle"] == 0
    saved = copies * hw["memcpy_startup_cycles"] + moved // hw["nram_bytes_per_cycle"]
    assert _sum(s_off, lambda n: n == "__memcpy") - _sum(s_on, lambda n: n == "__memcpy") == saved
    assert k_on["cycles"] < k_off["cycles"]


def _stmt(expr, dst="t"):
    return Stmt("compute", Load(dst, (Var("ln"),)), expr, [SLoop("ln", iconst(0), iconst(256))])


def test_only_the_cycle_form_qualifies():
    ln = (Var("ln"),)
    q, a = Load("q0", ln), Load("acc", ln)
    chans = {"q0"}
    assert cycle_form(_stmt(Bin("*", q, a)), chans) and cycle_form(_stmt(Bin("-", a, q)), chans)
    assert not cycle_form(_stmt(Bin("-", q, a)), chans)                 # cycle_sub subtracts the operand
    assert not cycle_form(_stmt(Bin("*", q, Var("v"))), chans)           # a scalar op would need every lane
    assert not cycle_form(_stmt(Un("round", q)), chans)
    assert not cycle_form(_stmt(Bin("*", q, Load("q1", ln))), {"q0", "q1"})
    # an epilogue (acc + bias) * m_c + zp: per-channel bias and multiplier, a scalar zero point
    b, m = Load("B", (Var("c"),)), Load("M", (Var("c"),))
    epi = Bin("+", Bin("*", Bin("+", Acc(), b), m), Const(3.0))
    kinds = {b: "channel", m: "channel"}
    assert cyclable(epi, [b, m], kinds, 64 * 4, 64, HW)
    assert not cyclable(epi, [b, m], kinds, 16 * 4, 16, HW)             # 16 floats: not a whole vector
    assert not cyclable(Bin("*", Un("abs", b), Acc()), [b], {b: "channel"}, 256, 64, HW)
