"""Differential fuzzing, the fixed CI slice: seeded random affine nests (scop_fuzzgen), one
program per seed with many regions, built serially by gcc and by `swbuild scop
--serial-fallback`. Every region is either transformed and the program prints what the
serial program prints, or refused with file:line; regions with a planted defect (an
out-of-bounds bound, a loop variable read after the region) must be refused.
The long run is benchmarks/scop_fuzz.py."""
import re

import pytest

from scop_fuzzgen import program
from scop_helpers import check_results

SEEDS = (11, 12)
CASES = 14
LOCATED = re.compile(r"^\S+\.c:\d+(:\d+)?: ")


@pytest.fixture(scope="module")
def fuzz_results(build_kernels, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    configs, cases = [], {}
    for seed in SEEDS:
        text, cs = program(seed, CASES)
        src = d / f"fuzz{seed}.c"
        src.write_text(text)
        configs.append((src, {}))
        cases[src.stem] = cs
    return build_kernels("sunway-emu", configs, serial_fallback=True), cases


def test_fuzz_outputs_equal_serial(fuzz_results):
    results, _ = fuzz_results
    check_results(results)


def test_fuzz_regions_transformed_or_refused_with_location(fuzz_results):
    results, cases = fuzz_results
    transformed = named = 0
    for res in results:
        cs = cases[res.name]
        assert len(res.plans) == len(cs)
        for plan, case in zip(res.plans, cs):
            tag = f"{res.name} case{case.index}"
            if plan.serial:
                assert LOCATED.match(plan.reason), f"{tag}: refusal without file:line: {plan.reason}"
                assert "internal error" not in plan.reason, f"{tag}: {plan.reason}"
            else:
                transformed += bool(plan.kernels)
            if case.defect:
                assert plan.serial, f"{tag}: planted defect '{case.defect}' was not refused"
                want = "out of bounds" if case.defect == "oob" else "loop variable"
                named += want in plan.reason        # (or refused earlier for another reason)
    # the slice must exercise the polyhedral path, not only refusals
    assert transformed >= len(SEEDS) * CASES // 3, transformed
    assert named >= 1
