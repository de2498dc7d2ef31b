"""Fixtures of the DianNao backend tests (helpers: dn_build.py, models: dn_models.py)."""
import pytest

from swbuild.config import toolchain


@pytest.fixture(scope="session")
def tc():
    return toolchain.load("diannao-emu")
