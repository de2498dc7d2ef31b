import pytest

import node_bundle


@pytest.fixture(scope="session")
def node_suite(shared_once):
    """Every claimed op's node tests, compiled into one emulated Sunway program (built once
    for all xdist workers)."""
    def build(d):
        cases, exe = node_bundle.prepare_all(d)
        return {c.name: c for c in cases}, exe, d
    return shared_once("node_bundle", build)
