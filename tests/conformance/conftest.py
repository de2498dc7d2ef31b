import pytest

import node_bundle


@pytest.fixture(scope="session")
def node_suite(tmp_path_factory):
    """Every claimed op's node tests, compiled into one emulated Sunway program."""
    d = tmp_path_factory.mktemp("node_bundle")
    cases, exe = node_bundle.prepare_all(d)
    return {c.name: c for c in cases}, exe, d
