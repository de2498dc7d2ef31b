"""Builds the BANG emulator test programs once per session (g++, at most 2 at a time)."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from bangemu_build import HERE, MTP_270, compile_mlu, hardware


@pytest.fixture(scope="session")
def builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("bang")
    jobs = {
        "kernels": (HERE / "kernels.mlu", hardware(), ()),
        "rules": (HERE / "rules.mlu", hardware(), ()),
        "rules270": (HERE / "rules.mlu", hardware(**MTP_270), ()),
        "rules_big": (HERE / "rules.mlu", hardware(), ("-DBIG_NRAM",)),
        "faults": (HERE / "faults.mlu", hardware(), ()),
        "stack": (HERE / "stack.mlu", hardware(), ()),
        # a toolchain file that states GDRAM rules (diannao.toml states none)
        "faults_gdram": (HERE / "faults.mlu", hardware(gdram_align_bytes=64, gdram_size_multiple_bytes=64), ()),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = {k: pool.submit(compile_mlu, src, d / k, hw, extra) for k, (src, hw, extra) in jobs.items()}
        return {k: f.result() for k, f in futs.items()}
