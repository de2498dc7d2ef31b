import pytest

from scons_project import make_project


@pytest.fixture
def fake_project(tmp_path):
    return make_project(tmp_path / "proj")
