"""The Python API (swbuild/api.py): compile, check, report, load_recipe on a small onnx.helper
model and on a light model of the onnx package, and the CLI going through it."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import swbuild
from cli_models import conv_softmax_pad
from swbuild import cli
from swbuild.support.errors import RecipeError, SwbuildError

ROOT = Path(__file__).resolve().parents[2]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_softmax_pad(tmp_path_factory.mktemp("api") / "small.onnx")


def test_import_is_cheap_and_names_the_api():
    code = ("import sys, swbuild; heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'onnx', "
            "'onnxruntime', 'SCons') or m.startswith('swbuild.')); print(heavy); print(dir(swbuild))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "['swbuild.support', 'swbuild.support.version']"      # the version only
    assert {"compile", "check", "report", "run", "load_recipe", "CheckResult"} <= set(eval(out[1]))
    with pytest.raises(AttributeError, match="no attribute 'kompile'"):
        swbuild.kompile


def test_compile_check_report_on_a_small_model(model, tmp_path):
    out = tmp_path / "sw"
    c = swbuild.compile(model, target="sunway-emu", out=out)
    assert isinstance(c, swbuild.CompileResult) and c.model == "small" and c.target == "sunway-emu"
    names = {p.name for p in c.files}
    assert {"small_host.c", "small_slave.c", "small.h", "small_runner.c", "small.plan.json", "small.lock.json"} <= names
    assert all(p.is_file() and p.parent == out for p in c.files)
    assert c.plan == json.loads((out / "small.plan.json").read_text()) and c.kernels >= 2
    assert f"#define SMALL_WORKSPACE_SIZE {c.arena_bytes}" in (out / "small.h").read_text()

    x = np.random.default_rng(7).standard_normal((1, 4, 8, 8)).astype(np.float32)
    r = swbuild.check(model, target="sunway-emu", out=out, inputs={"x": x}, save_outputs=tmp_path / "o.npz")
    assert isinstance(r, swbuild.CheckResult) and r.status == "pass" and r.passed, r.document
    assert r.document["status"] == "pass" and r.max_abs_err == r.document["max_abs_err"] < 1e-4
    from swbuild.driver.check import onnxruntime_reference
    want = onnxruntime_reference(onnx.load(str(model)), {"x": x})[0]
    assert np.allclose(r.outputs["y"], want, rtol=1e-3, atol=1e-4) and r.outputs["y"].shape == (1, 8, 10, 10)
    with np.load(tmp_path / "o.npz") as z:
        assert z.files == ["y"] and np.array_equal(z["y"], r.outputs["y"])
    assert r.runner == out / "small_runner" and r.saved == tmp_path / "o.npz"

    # a wrong expectation is a fail with its reason, not an exception
    bad = swbuild.check(model, target="sunway-emu", out=out, inputs={"x": x}, expected={"y": want + 1})
    assert bad.status == "fail" and "differ" in bad.reason and bad.max_abs_err == pytest.approx(1.0, abs=1e-4)

    rep = swbuild.report(model, target="sunway-emu", out=out)
    assert isinstance(rep, swbuild.ReportResult) and rep.plan["model"] == "small"
    assert rep.document["model"] == "small" and rep.document["kernel_launches"] == len(rep.document["kernels"]) >= 1
    assert rep.document["dma_match"] is True and all(k["dma"]["measured"] == k["dma"]["predicted"]
                                                     for k in rep.document["kernels"])
    assert rep.text.startswith("small on sunway-emu: ") and "main-memory traffic" in rep.text


def test_inputs_are_checked_against_the_model(model, tmp_path):
    with pytest.raises(SwbuildError, match=r"input 'x' has shape \[1, 4, 8\]; the model needs \[1, 4, 8, 8\]"):
        swbuild.check(model, target="sunway-emu", out=tmp_path / "sw", inputs={"x": np.zeros((1, 4, 8), np.float32)})
    np.save(tmp_path / "x.npy", np.zeros((1, 4, 8, 8), np.float32))
    r = swbuild.check(model, target="sunway-emu", out=tmp_path / "sw", inputs=tmp_path / "x.npy")
    assert r.status == "pass"


def test_load_recipe_with_overrides_and_its_errors(tmp_path):
    r = swbuild.load_recipe(ROOT / "recipes" / "vgg16.yaml", {"batch": 2, "simd": False})
    assert r.name == "vgg16" and r.batch == 2 and r.options["simd"] == "off"
    assert swbuild.load_recipe(ROOT / "recipes" / "vgg16.yaml", ["batch=3"]).batch == 3
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: bad\nsource: {onnx: nowhere.onnx}\noptions: {simd: maybe}\n")
    with pytest.raises(RecipeError) as e:
        swbuild.load_recipe(bad)
    assert any("simd" in str(one) for one in e.value.errors)


def test_the_cli_goes_through_the_api(model, tmp_path, monkeypatch, capsys):
    from swbuild import api
    calls = []
    real = api.check

    def spy(*a, **kw):
        calls.append((a, kw))
        return real(*a, **kw)
    monkeypatch.setattr(api, "check", spy)
    assert cli.main(["check", str(model), "--target", "sunway-emu", "-o", str(tmp_path / "sw"),
                     "--save-outputs", str(tmp_path / "c.npz")]) == 0
    assert len(calls) == 1 and calls[0][1]["target"] == "sunway-emu" and calls[0][1]["save_outputs"] == str(tmp_path / "c.npz")
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["status"] == "pass" and (tmp_path / "c.npz").is_file()
    for name, argv in [("compile", ["compile", str(model), "-t", "sunway-emu", "-o", str(tmp_path / "g")]),
                       ("report", ["report", str(model), "-t", "sunway-emu", "-o", str(tmp_path / "sw")])]:
        seen = []
        monkeypatch.setattr(api, name, lambda *a, _seen=seen, _real=getattr(api, name), **kw: _seen.append(kw) or _real(*a, **kw))
        assert cli.main(argv) == 0 and len(seen) == 1, name


@pytest.mark.slow
def test_check_a_light_model_against_its_shipped_outputs(tmp_path):
    path = LIGHT / "light_squeezenet.onnx"
    c = swbuild.compile(path, target="sunway-emu", out=tmp_path / "sq")
    assert c.model == "light_squeezenet" and c.kernels > 10
    r = swbuild.check(path, target="sunway-emu", out=tmp_path / "sq", save_outputs=tmp_path / "sq.npz")
    assert r.status == "pass", r.document
    from onnx import TensorProto, numpy_helper
    t = TensorProto()
    t.ParseFromString((LIGHT / "light_squeezenet_output_0.pb").read_bytes())
    (name, got), = r.outputs.items()
    assert np.allclose(got, numpy_helper.to_array(t), rtol=1e-3, atol=1e-4)
