import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/onnx_builders.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))   # tests/cli/cli_models.py
