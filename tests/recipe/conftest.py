import pytest

from recipe_models import write_tiny


@pytest.fixture
def project(tmp_path):
    """A project dir with models/tiny.onnx; returns (dir, sha256)."""
    sha = write_tiny(tmp_path / "models" / "tiny.onnx")
    (tmp_path / "recipes").mkdir()
    return tmp_path, sha
