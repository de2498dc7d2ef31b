"""Recipe errors a user meets first: all of them at once, each `file:line: field: message`,
"did you mean" for keys and values, the sha256 to paste, input names blamed on the recipe's
line, and C SCoPs on a DianNao target refused with a reason (never a traceback)."""
import json
import re

import pytest

from swbuild import cli
from swbuild.support.errors import RecipeError
from swbuild.config.recipe import load_recipe
from swbuild.config.recipe_checks import sha256_file

BAD = """\
modle: tiny
source:
  onnx: ../models/tiny.onnx
  sha256: "{sha}"
inputs:
  - name: data
    shape: [1, 3, 8, 8]
    dtype: flaot32
targets: [sunway-emux]
options:
  simd: of
  doubel_buffer: on
check:
  rtool: 1e-3
"""


def test_every_error_at_once_with_did_you_mean(project):
    d, sha = project
    p = d / "recipes" / "tiny.yaml"
    p.write_text(BAD.format(sha=sha))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    got = [(x.line, x.field) for x in e.value.errors]
    assert got == [(0, "model"), (1, "modle"), (8, "inputs[0].dtype"), (9, "targets[0]"), (11, "options.simd"),
                   (12, "options.doubel_buffer"), (14, "check.rtool")]
    lines = str(e.value).splitlines()
    assert len(lines) == 7 and all(ln.startswith(f"{p}:") for ln in lines)
    for field, want in [("modle", "model"), ("inputs[0].dtype", "float32"), ("targets[0]", "sunway-emu"),
                        ("options.simd", "off"), ("options.doubel_buffer", "double_buffer"), ("check.rtool", "rtol")]:
        line = next(ln for ln in lines if f": {field}: " in ln)
        assert f"(did you mean '{want}'?)" in line, line
    assert (e.value.line, e.value.field) == (0, "model")     # the first error's attributes


def test_cli_prints_each_error_on_its_own_line(project, capsys):
    d, sha = project
    p = d / "recipes" / "tiny.yaml"
    p.write_text(BAD.format(sha=sha))
    assert cli.main(["compile", "--recipe", str(p), "--target", "sunway-emu", "-o", str(d / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 7 and all(re.match(rf"swbuild: error: {re.escape(str(p))}(:\d+)?: \S+: ", ln) for ln in err), err
    assert "Traceback" not in "\n".join(err)


def test_sha256_to_paste_when_missing_or_wrong(project):
    d, sha = project
    p = d / "recipes" / "tiny.yaml"
    body = BAD.format(sha=sha).replace("modle", "model").replace("flaot32", "float32").replace("-emux", "-emu")
    body = body.replace("of\n", "off\n").replace("doubel_", "double_").replace("rtool", "rtol")
    p.write_text(body.replace(f'  sha256: "{sha}"\n', ""))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert (e.value.line, e.value.field) == (3, "source.onnx")
    assert f'sha256: "{sha}"' in str(e.value) and sha == sha256_file(d / "models" / "tiny.onnx")
    p.write_text(body.replace(sha, "0" * 64))
    with pytest.raises(RecipeError) as e:
        load_recipe(p).verify_source()
    assert (e.value.line, e.value.field) == (4, "source.sha256") and f'set  sha256: "{sha}"' in str(e.value)
    p.write_text(body.replace(sha, "abc"))
    with pytest.raises(RecipeError, match=f'64 hex digits.*sha256: "{sha}"'):
        load_recipe(p)


def test_wrong_input_name_blames_the_recipe_line(project, capsys):
    d, sha = project
    p = d / "recipes" / "tiny.yaml"
    p.write_text(f"model: tiny\nsource:\n  onnx: ../models/tiny.onnx\n  sha256: \"{sha}\"\n"
                 "inputs:\n  - name: dat\n    shape: [1, 3, 8, 8]\n")
    assert cli.main(["compile", "--recipe", str(p), "--target", "sunway-emu", "-o", str(d / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{p}:6: inputs[0].name: 'dat' is not an input of the model (did you mean 'data'?)" in err, err
    assert "--input" not in err
    # the same name given on the command line is blamed on the flag
    assert cli.main(["compile", str(d / "models" / "tiny.onnx"), "--input", "dat=1x3x8x8", "--target", "sunway-emu",
                     "-o", str(d / "out")]) == 2
    assert "--input dat=...: 'dat' is not an input of the model" in capsys.readouterr().err


SCOP = "#include <stdio.h>\nfloat a[8];\nint main(void) {\n#pragma scop\n  for (int i = 0; i < 8; i++) a[i] = i;\n" \
       "#pragma endscop\n  printf(\"%f\\n\", a[3]);\n  return 0;\n}\n"


def test_scop_on_a_diannao_target_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "mm.c").write_text(SCOP)
    why = "is a diannao target; C files with #pragma scop regions compile for sunway targets only"
    # the scop command
    assert cli.main(["scop", str(tmp_path / "mm.c"), "--target", "diannao-emu", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err and "KeyError" not in err
    # a recipe that lists the target: its targets line
    r = tmp_path / "recipes" / "mm.yaml"
    r.write_text("model: mm\nsource:\n  scop: ../mm.c\ntargets: [sunway-emu, diannao-emu]\n")
    with pytest.raises(RecipeError, match=rf"mm.yaml:4: targets\[1\]: target 'diannao-emu' {why}"):
        load_recipe(r)
    # a recipe for every target, built for DianNao: compile and check name the source line
    r.write_text("model: mm\nsource:\n  scop: ../mm.c\n")
    assert cli.main(["compile", "--recipe", str(r), "--target", "diannao-emu", "-o", str(tmp_path / "o")]) == 2
    assert f"mm.yaml:3: source.scop: target 'diannao-emu' {why}" in capsys.readouterr().err
    assert cli.main(["check", "--recipe", str(r), "--target", "diannao-emu", "-o", str(tmp_path / "o")]) == 2
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(out)["status"] == "error" and why in json.loads(out)["reason"]


def test_sunway_only_options_are_refused_by_name_on_diannao(tmp_path, capsys):
    import onnx
    from onnx import helper
    from onnx_builders import make
    onnx.save(make([helper.make_node("Relu", ["x"], ["y"])], [("x", [4, 64])], [("y", [4, 64])]), tmp_path / "r.onnx")
    code = cli.main(["compile", str(tmp_path / "r.onnx"), "--target", "diannao-emu", "--set", "ldm_reserve=65536",
                     "--set", "simd=off", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert "option simd=off does not apply to the diannao family" in err
    assert "option ldm_reserve=65536 does not apply to the diannao family (it is read by sunway targets only" in err
    assert not (tmp_path / "o").exists()
    # a shared recipe's defaults (double_buffer: on, ldm_reserve: auto) change nothing: accepted
    assert cli.main(["compile", str(tmp_path / "r.onnx"), "--target", "diannao-emu", "--set", "ldm_reserve=auto",
                     "--set", "simd=on", "-o", str(tmp_path / "o")]) == 0
    assert cli.main(["compile", str(tmp_path / "r.onnx"), "--target", "sunway-emu", "--set", "ldm_reserve=32768",
                     "-o", str(tmp_path / "s")]) == 0
