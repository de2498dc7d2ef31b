"""benchmarks/model_zoo.py --table (the table of docs/model_zoo.md): one line per footnote, the
traceback's verdict rather than its tail, so the Markdown table and its notes stay intact."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _zoo():
    spec = importlib.util.spec_from_file_location("model_zoo", REPO / "benchmarks" / "model_zoo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PY_TRACEBACK = """Traceback (most recent call last):
  File "x.py", line 572, in forward
    past_seen_tokens = cache.get_seq_length() if cache is not None else 0
                       ^^^^^^^^^^^^^^^^^^^^
AttributeError: 'Tensor' object has no attribute 'get_seq_length'
"""
DYNAMO = """- Create an issue in the PyTorch GitHub repository against the \x1b[96m*torch.export*\x1b[0m component.

## Exception summary

<class 'AttributeError'>: 'FakeTensor' object has no attribute 'get_seq_length'

(Refer to the full stack trace above for more information.)
"""


def test_last_error_line_is_the_verdict():
    z = _zoo()
    assert z.last_error_line(PY_TRACEBACK) == "AttributeError: 'Tensor' object has no attribute 'get_seq_length'"
    assert z.last_error_line(DYNAMO) == "<class 'AttributeError'>: 'FakeTensor' object has no attribute 'get_seq_length'"
    assert z.last_error_line("outputs differ | a\n  b  ") == "b"
    assert z.last_error_line("a | b") == "a \\| b"


def test_table_footnotes_are_one_line_each(tmp_path):
    z = _zoo()
    rows = [{"model": "gpt2", "exporter": "dynamo", "checks": {}, "export": {"status": "error", "error": DYNAMO}},
            {"model": "gpt2", "exporter": "torchscript", "export": {"status": "ok"},
             "checks": {"sunway-emu": {"status": "error", "error": PY_TRACEBACK, "seconds": 3.0},
                        "diannao-emu": {"status": "pass", "seconds": 12.4}}}]
    (tmp_path / "r.json").write_text(json.dumps({"rows": rows}))
    text = z.table([tmp_path / "r.json"])
    table, notes = text.split("\n\n")
    lines = table.splitlines()
    assert all(ln.count("|") == lines[0].count("|") for ln in lines)
    assert lines[2] == "| gpt2 | export error [1] | export error [1] | pass (12 s) | error [2] |"
    assert notes.splitlines() == [
        "- [1] gpt2 (dynamo): export failed: <class 'AttributeError'>: 'FakeTensor' object has no attribute "
        "'get_seq_length'",
        "- [2] gpt2 (torchscript, sunway-emu): AttributeError: 'Tensor' object has no attribute 'get_seq_length'"]


def test_later_files_add_and_replace_checks(tmp_path):
    """A target redone in a later run replaces that cell only; the other target's cell stays."""
    z = _zoo()
    first = [{"model": "inception_v3", "exporter": "dynamo", "export": {"status": "ok"},
              "checks": {"sunway-emu": {"status": "fail", "reason": "outputs differ", "seconds": 39.0},
                         "diannao-emu": {"status": "pass", "seconds": 40.2}}}]
    later = [{"model": "inception_v3", "exporter": "dynamo", "export": {"status": "ok", "reused": True},
              "checks": {"sunway-emu": {"status": "pass", "seconds": 250.0}}}]
    (tmp_path / "a.json").write_text(json.dumps({"rows": first}))
    (tmp_path / "b.json").write_text(json.dumps({"rows": later}))
    text = z.table([tmp_path / "a.json", tmp_path / "b.json"])
    assert text.splitlines()[2] == "| inception_v3 | pass (40 s) | pass (250 s) |"


def test_a_pass_with_a_note_says_it(tmp_path):
    """A pass by check's float64 second opinion carries its note: the table points to it."""
    z = _zoo()
    why = ("outputs differ from the reference (onnxruntime) beyond rtol/atol by float32 rounding alone: "
           "against a float64 evaluation (onnx.reference) of 'out' swbuild's error is 9.5e-05 rms relative")
    rows = [{"model": "fcn_resnet50", "exporter": "dynamo", "export": {"status": "ok"},
             "checks": {"sunway-emu": {"status": "pass", "seconds": 71.0, "note": why},
                        "diannao-emu": {"status": "pass", "seconds": 82.0}}}]
    (tmp_path / "r.json").write_text(json.dumps({"rows": rows}))
    table, notes = z.table([tmp_path / "r.json"]).split("\n\n")
    assert table.splitlines()[2] == "| fcn_resnet50 | pass (82 s) | pass (71 s) [1] |"
    assert notes.splitlines() == [f"- [1] fcn_resnet50 (dynamo, sunway-emu): {why}"]
