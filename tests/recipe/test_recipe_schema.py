"""Recipe schema: every error names file, line and field, in YAML and in TOML."""
import json
import shutil
from pathlib import Path

import pytest

from swbuild.support.errors import RecipeError
from swbuild.config.recipe import OPTIONS, InputSpec, find_recipe, list_models, load_recipe, parse_sets

REPO = Path(__file__).resolve().parents[2]

YAML = """\
model: tiny
source:
  onnx: ../models/tiny.onnx
  sha256: {sha}
inputs:
  - name: data
    shape: [1, 3, 8, 8]
batch: 1
targets: [sunway-emu]
options:
  simd: "off"
check:
  rtol: 1e-3
"""

TOML = """\
model = "tiny"
batch = 1
targets = ["sunway-emu"]

[source]
onnx = "../models/tiny.onnx"
sha256 = "{sha}"

[[inputs]]
name = "data"
shape = [1, 3, 8, 8]

[options]
simd = "off"

[check]
rtol = 1e-3
"""


def write(project, name, text):
    p = project / "recipes" / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_valid_recipe(project, fmt):
    d, sha = project
    r = load_recipe(write(d, f"tiny.{fmt}", (YAML if fmt == "yaml" else TOML).format(sha=sha)))
    assert r.name == "tiny" and r.source_kind == "onnx" and r.sha256 == sha
    assert r.source == (d / "models" / "tiny.onnx") and r.source.is_absolute()
    assert r.inputs == (InputSpec("data", (1, 3, 8, 8), "float32"),)
    assert r.targets == ("sunway-emu",)
    assert r.options == {"partition": "on", "double_buffer": "on", "simd": "off", "ldm_reserve": "auto",
                         "row_share": "on", "traffic_target": "off"}
    assert r.check == {"rtol": 1e-3, "atol": 1e-4, "seed": 0, "fp16_rtol": 1e-2, "fp16_atol": 1e-2, "timeout": 3600}
    assert r.line_of("options.simd") == (11 if fmt == "yaml" else 14)
    r.verify_source()


# (old text, new text, field, line of the error) applied to YAML above
YAML_ERRORS = [
    ("batch: 1", "batch: 0", "batch", 8, ">= 1"),
    ("batch: 1", "batch: two", "batch", 8, "integer"),
    ("batch: 1", "btach: 1", "btach", 8, "unknown field"),
    ("model: tiny\n", "", "model", 0, "missing"),
    ("  sha256: {sha}\n", "", "source.onnx", 3, "sha256"),
    ("  sha256: {sha}", "  sha256: abc", "source.sha256", 4, "64 hex"),
    ("  onnx: ../models/tiny.onnx", "  onnx: ../models/tiny.onnx\n  zoo: vgg16", "source", 2, "exactly one"),
    ("  onnx: ../models/tiny.onnx", "  onnx: ../models/tiny.onnx\n  url: x", "source.url", 4, "unknown field"),
    ("shape: [1, 3, 8, 8]", "shape: [1, 0, 8]", "inputs[0].shape", 7, "positive"),
    ("shape: [1, 3, 8, 8]", "shape: 5", "inputs[0].shape", 7, "positive"),
    ("    shape: [1, 3, 8, 8]", "    shape: [1, 3, 8, 8]\n    dtype: float8", "inputs[0].dtype", 8, "dtype"),
    ("targets: [sunway-emu]", "targets: [sunway-emu, cuda]", "targets[1]", 9, "unknown target"),
    ('  simd: "off"', "  simd: maybe", "options.simd", 11, "on, off"),
    ('  simd: "off"', "  vectorize: on", "options.vectorize", 11, "unknown option"),
    ('  simd: "off"', "  batch: 2", "options.batch", 11, "set by `batch`"),
    ("  rtol: 1e-3", "  rtol: tight", "check.rtol", 13, "number"),
    ("  rtol: 1e-3", "  seeds: 1", "check.seeds", 13, "unknown field"),
    ("batch: 1", "batch: 1\nbatch: 2", "batch", 9, "duplicate"),
    ("targets: [sunway-emu]", "targets: [sunway-emu", None, 10, "syntax"),
]


@pytest.mark.parametrize("old,new,field,line,text", YAML_ERRORS, ids=[e[2] or "syntax" for e in YAML_ERRORS])
def test_yaml_errors_name_file_line_field(project, old, new, field, line, text):
    d, sha = project
    body = YAML.replace(old, new).format(sha=sha)
    p = write(d, "tiny.yaml", body)
    with pytest.raises(RecipeError) as e:
        load_recipe(p).verify_source()
    assert (e.value.path, e.value.field, e.value.line) == (p, field, line), str(e.value)
    assert text in str(e.value)
    assert str(e.value).startswith(f"{p}:{line}: " if line else f"{p}: ")


TOML_ERRORS = [
    ("batch = 1", "batch = 0", "batch", 2, ">= 1"),
    ("batch = 1", 'batch = "2"', "batch", 2, "integer"),
    ("batch = 1", "bacth = 1", "bacth", 2, "unknown field"),
    ('sha256 = "{sha}"', 'sha256 = "xyz"', "source.sha256", 7, "64 hex"),
    ('sha256 = "{sha}"', "", "source.onnx", 6, "sha256"),
    ("shape = [1, 3, 8, 8]", "shape = [1, -3]", "inputs[0].shape", 11, "positive"),
    ('simd = "off"', 'simd = "sometimes"', "options.simd", 14, "on, off"),
    ('simd = "off"', "tile = 4", "options.tile", 14, "unknown option"),
    ('targets = ["sunway-emu"]', 'targets = ["nope"]', "targets[0]", 3, "unknown target"),
    ("rtol = 1e-3", "rtol = 1e-3\nspeed = 1", "check.speed", 18, "unknown field"),
    ("rtol = 1e-3", "rtol = [1", None, 17, "syntax"),
]


@pytest.mark.parametrize("old,new,field,line,text", TOML_ERRORS, ids=[e[2] or "syntax" for e in TOML_ERRORS])
def test_toml_errors_name_file_line_field(project, old, new, field, line, text):
    d, sha = project
    p = write(d, "tiny.toml", TOML.replace(old, new).format(sha=sha))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert (e.value.path, e.value.field, e.value.line) == (p, field, line), str(e.value)
    assert text in str(e.value)


def test_toml_inline_tables_have_lines(project):
    d, sha = project
    p = write(d, "t.toml", f'model = "t"\nsource = {{ onnx = "../models/tiny.onnx", sha256 = "{sha}" }}\n'
                           'check = { rtol = 1e-3, atol = "x" }\n')
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert (e.value.field, e.value.line) == ("check.atol", 3)


def test_zoo_source_and_both_missing(project):
    d, _ = project
    r = load_recipe(write(d, "z.yaml", "model: z\nsource: {zoo: vgg16}\n"))
    assert (r.source_kind, r.source, r.sha256, r.source_files()) == ("zoo", "vgg16", None, [])
    with pytest.raises(RecipeError, match="source: missing"):
        load_recipe(write(d, "z.yaml", "model: z\n"))
    with pytest.raises(RecipeError, match="only an `onnx` source"):
        load_recipe(write(d, "z.yaml", f"model: z\nsource: {{zoo: vgg16, sha256: {'a' * 64}}}\n"))
    with pytest.raises(RecipeError, match=r"z.yaml:2: source.zoo: unknown zoo model 'vgg17' \(did you mean 'vgg16'\?\); available: .*vgg16"):
        load_recipe(write(d, "z.yaml", "model: z\nsource: {zoo: vgg17}\n"))
    with pytest.raises(RecipeError, match="empty recipe"):
        load_recipe(write(d, "z.yaml", "# nothing\n"))


def test_yaml_bare_on_off_and_string_floats(project):
    d, _ = project
    r = load_recipe(write(d, "z.yaml", "model: z\nsource: {zoo: vgg16}\noptions: {partition: off, simd: on}\n"
                                       "check: {atol: 1e-5, rtol: 0.01, seed: 7}\n"))
    assert r.options["partition"] == "off" and r.options["simd"] == "on"
    assert r.check == {"atol": 1e-5, "rtol": 0.01, "seed": 7, "fp16_rtol": 1e-2, "fp16_atol": 1e-2, "timeout": 3600}


def test_batch_overrides_first_dim_and_defaults_to_it(project):
    d, sha = project
    base = YAML.format(sha=sha)
    r = load_recipe(write(d, "a.yaml", base.replace("batch: 1", "batch: 4")))
    assert r.batch == 4 and r.inputs[0].shape == (4, 3, 8, 8)
    r = load_recipe(write(d, "a.yaml", base.replace("batch: 1\n", "").replace("[1, 3, 8, 8]", "[2, 3, 8, 8]")))
    assert r.batch == 2
    r2 = r.with_overrides(parse_sets(["batch=8", "seed=3", "simd=on", "atol=0.5"]))
    assert r2.batch == 8 and r2.inputs[0].shape == (8, 3, 8, 8)
    assert r2.check == {"rtol": 1e-3, "atol": 0.5, "seed": 3, "fp16_rtol": 1e-2, "fp16_atol": 1e-2, "timeout": 3600} and r2.options["simd"] == "on"
    assert r.batch == 2                      # frozen: the original is untouched
    assert r2.normalized()["batch"] == 8 and r2.normalized()["inputs"][0]["shape"] == [8, 3, 8, 8]


def test_parse_sets():
    assert parse_sets(["batch=2", "partition=OFF", "ldm_reserve=4096", "rtol=1e-2", "ldm_reserve=auto"]) == \
        {"batch": 2, "partition": "off", "ldm_reserve": "auto", "rtol": 0.01}
    assert parse_sets([]) == {}
    for bad, field, allowed in [("batch=0", "batch", "integer >= 1"), ("batch=x", "batch", "integer"),
                                ("simd=maybe", "simd", "on, off"), ("tile=4", "tile", "batch, seed"),
                                ("ldm_reserve=-1", "ldm_reserve", "auto or an integer")]:
        with pytest.raises(RecipeError) as e:
            parse_sets([bad])
        assert e.value.field == field and e.value.path is None and e.value.line == 0
        assert "allowed: " in str(e.value) and allowed in str(e.value)
    with pytest.raises(RecipeError, match="KEY=VALUE"):
        parse_sets(["batch"])


def test_options_table():
    assert {"batch", "seed", "rtol", "atol", "partition", "double_buffer", "simd", "row_share", "ldm_reserve"} <= set(OPTIONS)
    assert OPTIONS["row_share"].default == "on"
    assert OPTIONS["partition"].default == "on" and OPTIONS["ldm_reserve"].default == "auto"
    assert OPTIONS["batch"].field == "batch" and OPTIONS["seed"].field == "check.seed"


def test_normalized_is_independent_of_directory(tmp_path, project):
    d, sha = project
    a = write(d, "tiny.yaml", YAML.format(sha=sha))
    other = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(d, other)
    b = other / "recipes" / "tiny.yaml"
    na, nb = load_recipe(a).normalized(), load_recipe(b).normalized()
    assert na == nb
    text = json.dumps(na, sort_keys=True)
    assert str(tmp_path) not in text and na["source"] == {"onnx": "../models/tiny.onnx", "sha256": sha}
    assert list(na) == sorted(na)
    # The same recipe in TOML normalises to the same thing.
    assert load_recipe(write(d, "tiny.toml", TOML.format(sha=sha))).normalized() == na


def test_verify_source(project):
    d, sha = project
    p = write(d, "tiny.yaml", YAML.format(sha="f" * 64))
    with pytest.raises(RecipeError) as e:
        load_recipe(p).verify_source()
    assert e.value.field == "source.sha256" and e.value.line == 4
    assert sha in str(e.value) and "f" * 64 in str(e.value)
    (d / "models" / "tiny.onnx").unlink()
    with pytest.raises(RecipeError) as e:
        load_recipe(p).verify_source()
    assert (e.value.field, e.value.line) == ("source.onnx", 3) and "not found" in str(e.value)


def test_source_files_lists_external_data(project):
    from recipe_models import write_tiny
    d, _ = project
    sha = write_tiny(d / "models" / "ext.onnx", external="ext.weights")
    p = write(d, "ext.yaml", f"model: ext\nsource: {{onnx: ../models/ext.onnx, sha256: {sha}}}\n")
    r = load_recipe(p)
    assert r.source_files() == [d / "models" / "ext.onnx", d / "models" / "ext.weights"]
    r.verify_source()


def test_find_recipe_and_list_models(project):
    d, sha = project
    assert list_models(d) == []
    write(d, "b.toml", TOML.format(sha=sha))
    write(d, "a.yaml", YAML.format(sha=sha))
    write(d, "notes.txt", "x")
    assert list_models(d) == ["a", "b"]
    assert find_recipe(d, "b") == d / "recipes" / "b.toml"
    with pytest.raises(RecipeError, match=r"no recipe for model 'c' \(available: a, b\)"):
        find_recipe(d, "c")
    write(d, "a.yml", YAML.format(sha=sha))
    with pytest.raises(RecipeError, match="several recipes"):
        find_recipe(d, "a")


def test_shipped_recipes_load():
    assert {"vgg16", "vgg16-b2"} <= set(list_models(REPO))
    v = load_recipe(find_recipe(REPO, "vgg16"))
    b2 = load_recipe(find_recipe(REPO, "vgg16-b2"))
    assert (v.name, v.source_kind, v.source, v.batch) == ("vgg16", "zoo", "vgg16", 1)
    assert (b2.name, b2.batch, b2.path.suffix) == ("vgg16-b2", 2, ".toml")
    assert set(v.targets) == {"sunway-emu", "sunway", "sunway-pro", "sunway-pro-emu"}


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_cli_takes_a_recipe_as_its_model_argument(project, tmp_path, fmt):
    """`swbuild compile RECIPE` (and report/check) as the docs spell it, via `python -m swbuild`."""
    import subprocess
    import sys
    d, sha = project
    r = write(d, f"tiny.{fmt}", (YAML if fmt == "yaml" else TOML).format(sha=sha))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "swbuild", "compile", str(r), "-t", "sunway-emu", "-o", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (out / "tiny.lock.json").is_file()
    assert any(out.glob("*_slave.c"))
    p = subprocess.run([sys.executable, "-m", "swbuild", "compile", str(r), "--recipe", str(r), "-t", "sunway-emu"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "either MODEL or --recipe" in p.stderr
