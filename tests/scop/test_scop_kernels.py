"""End to end: every listed kernel through `swbuild scop --exe` equals the serial program.

Each test builds a batch of kernels (two compile/run processes at a time) and checks the
printed checksums and samples (1e-6 relative), the emulator's LDM peak against the target's
budget and its write-conflict count.
"""
import pytest

from scop_helpers import KERNELS, SIZES, check_results


def _configs(sizes, symbolic=False, kernels=KERNELS):
    macros = dict(sizes)
    if symbolic:
        macros["SYMBOLIC"] = None
    return [(k, macros) for k in kernels]


def test_kernels_constant_default_sizes(build_kernels):
    """The files' own sizes (90, 100, 110, ...): not multiples of 32."""
    check_results(build_kernels("sunway-emu", _configs({})))


@pytest.mark.slow      # default and odd sizes stay quick; the aligned sizes add little
def test_kernels_constant_multiples_of_64(build_kernels):
    check_results(build_kernels("sunway-emu", _configs(SIZES["mult64"])))


@pytest.mark.slow
def test_kernels_symbolic_multiples_of_32(build_kernels):
    """Loop bounds are the kernel functions' int arguments: isl parameters."""
    results = build_kernels("sunway-emu", _configs(SIZES["mult32"], symbolic=True))
    check_results(results)
    assert all(r.plans[0].region.params for r in results), "symbolic bounds became constants"


def test_kernels_symbolic_odd_sizes(build_kernels):
    check_results(build_kernels("sunway-emu", _configs(SIZES["odd"], symbolic=True)))


def test_large_reduction_dimension_is_tiled(build_kernels):
    """A reduction too long for the LDM: its band member gets tiles of its own and the
    buffers are copied at that inner tile loop."""
    big = dict(NI=96, NJ=80, NK=2000, N=200, M=1200, NR=4, NQ=3, NP=300, TSTEPS=2)
    results = build_kernels("sunway-emu", _configs(big, kernels=["gemm", "syrk", "trmm", "doitgen"]))
    check_results(results)
    gemm = results[0].plans[0].kernels[0]
    assert gemm.tiling.sizes[2] is not None, gemm.tiling
    assert max(g.level for g in gemm.groups) == len(gemm.tiling.order)


@pytest.mark.parametrize("target", ["sunway-pro-emu"])
def test_kernels_crts_api(build_kernels, target):
    """CRTS spellings (CRTS_dma_iget, crts_rply_t, ...) and the 256 KB LDM budget."""
    results = build_kernels(target, _configs({}, kernels=["gemm", "trmm", "jacobi-2d", "doitgen"])
                            + _configs(SIZES["odd"], symbolic=True, kernels=["syr2k", "gemver"]))
    check_results(results, target)


def test_features_kernel(build_kernels):
    """Strided and reversed loops, if/else, MIN bounds, math calls, a serial recurrence."""
    results = build_kernels("sunway-emu", [("features", {}), ("features", {"SYMBOLIC": None, "N": 64})])
    check_results(results)
    assert results[0].plans[0].host.serial, "the recurrence must stay on the MPE"
