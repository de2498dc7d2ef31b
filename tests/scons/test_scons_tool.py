"""Unit tests of the SCons tool on bare Environments (no SCons run)."""
import pytest
from SCons.Environment import Environment
from SCons.Variables import Variables

import swbuild.scons as tool
from swbuild.driver.build import generated_files
from SCons.Action import Action

from swbuild.scons.compile import cmd_list
from swbuild.scons.gen import PACKAGE_DIR, package_sources, scan_recipe, swgen_emitter
from swbuild.scons.setup import compiler_variables, make_variables

from scons_project import make_project


@pytest.fixture
def proj(tmp_path):
    return make_project(tmp_path / "p")


def test_generate_on_bare_environment(proj):
    env = Environment(tools=[])
    tool.generate(env, target="sunway-emu", project_dir=str(proj))
    assert "SwGen" in env["BUILDERS"] and hasattr(env, "SwModel")
    assert env["SWBUILD_TARGET"] == "sunway-emu" and env["SWBUILD_TOOLCHAIN"].family == "sunway"
    assert env["SWBUILD_COMPILER_ERROR"] == ""            # gcc is here
    assert env["SWGENCOM"].startswith("$SWCLI compile") and "$(" in env["SWCLI"]
    assert str(PACKAGE_DIR.parent) in env["ENV"]["PYTHONPATH"]
    assert str(proj / "toolchains") in env["ENV"]["SWBUILD_TOOLCHAINS"]
    assert tool.exists(env)


def test_generator_commands_see_the_users_cache_and_worker_settings(proj, monkeypatch, tmp_path):
    """SCons hands commands only PATH: the caches' places and the worker count go through."""
    monkeypatch.setenv("SWBUILD_SCHEDULE_CACHE", str(tmp_path / "sched"))
    monkeypatch.setenv("SWBUILD_ZOO_CACHE", "off")
    monkeypatch.setenv("SWBUILD_JOBS", "3")
    env = Environment(tools=[])
    tool.generate(env, target="sunway-emu", project_dir=str(proj))
    assert env["ENV"]["SWBUILD_SCHEDULE_CACHE"] == str(tmp_path / "sched")
    assert env["ENV"]["SWBUILD_ZOO_CACHE"] == "off" and env["ENV"]["SWBUILD_JOBS"] == "3"


def test_generate_keeps_user_values_and_reads_variables(proj):
    env = Environment(tools=[], SWGENCOM="mygen $SOURCE", target="fake-emu", SWBUILD_PROJECT=str(proj),
                      batch="2", simd="off")
    tool.generate(env)
    assert env["SWGENCOM"] == "mygen $SOURCE" and env["SWBUILD_TARGET"] == "fake-emu"
    assert env["SWBUILD_SETS"] == ["batch=2", "simd=off"]


def test_generate_records_missing_cross_compiler(proj, monkeypatch):
    monkeypatch.delenv("SW5CC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    env = Environment(tools=[])
    tool.generate(env, target="sunway", project_dir=str(proj))
    msg = env["SWBUILD_COMPILER_ERROR"]
    assert "sw5cc" in msg and "SW5CC=/path/to/sw5cc" in msg


def test_generate_unknown_target_exits(proj, capsys):
    with pytest.raises(SystemExit):
        tool.generate(Environment(tools=[]), target="cuda", project_dir=str(proj))
    assert "unknown target 'cuda'" in capsys.readouterr().err


def test_emitter_declares_every_generated_file(proj):
    env = Environment(tools=[], SWBUILD_PREFIX="vgg16_b2", SWBUILD_FAMILY="sunway")
    out = env.Dir(str(proj / "build/sunway-emu/vgg16-b2"))
    rec = env.File(str(proj / "recipes/tiny.yaml"))
    targets, sources = swgen_emitter([out], [rec], env)
    assert [t.name for t in targets] == list(generated_files("vgg16_b2", "sunway").values())
    assert [t.name for t in targets] == ["vgg16_b2_host.c", "vgg16_b2_slave.c", "vgg16_b2_para.h", "vgg16_b2.h",
                                         "vgg16_b2_weights.bin", "vgg16_b2_weights.S", "vgg16_b2_runner.c",
                                         "vgg16_b2.plan.json", "vgg16_b2.lock.json"]
    assert all(t.dir is out for t in targets) and sources == [rec]


def test_recipe_scanner_finds_model(proj):
    env = Environment(tools=[])
    deps = scan_recipe(env.File(str(proj / "recipes/tiny.yaml")), env)
    assert [d.get_abspath() for d in deps] == [str(proj / "models/tiny.onnx")]


def test_swmodel_nodes(proj):
    env = Environment(tools=["default"], SWBUILD_PROJECT=str(proj), target="fake-emu", batch="3")
    tool.generate(env)
    b = env.SwModel("tiny")
    assert b.prefix == "tiny" and b.recipe.batch == 3
    assert b.dir.path.endswith("build/fake-emu/tiny-batch3")     # an option set of its own
    assert b.runner[0].name == "tiny_runner" and b.lib[0].name == "libtiny.a"
    assert len(b.sources) == 9
    deps = {str(d) for d in b.sources[0].depends}
    assert any(d.endswith("toolchains/fake-emu.toml") for d in deps)
    assert any(d.endswith("toolchains/sunway.toml") for d in deps)      # what fake-emu emulates
    assert any(d.endswith("swbuild/config/recipe.py") for d in deps)
    value = [d for d in b.sources[0].depends if d.__class__.__name__ == "Value"]
    assert len(value) == 1 and '"batch": 3' in value[0].read() and '"target": "fake-emu"' in value[0].read()
    assert str(proj) not in value[0].read()
    assert env.subst("$SWGENFLAGS", target=b.sources, source=b.sources[0].sources) == ""  # flags live per node
    assert b.sources[0].get_executor().get_build_env()["SWGENFLAGS"] == "--set batch=3"


def test_package_sources_exclude_the_tool():
    srcs = package_sources()
    assert any(s.endswith("swbuild/config/recipe.py") for s in srcs)
    assert not any("/swbuild/scons/" in s for s in srcs)


def test_compiler_argv_keeps_absolute_paths_out_of_signature():
    env = Environment(tools=[], CC=cmd_list(["/opt/sw/bin/sw5cc", "-slave", "-I/x/y", "-Wa,-I,/q", "a$b"]))
    assert Action("$CC -c x.c").get_contents([], [], env) == b"-slave a$b -c x.c"      # the signature
    assert env.subst_list("$CC")[0] == ["/opt/sw/bin/sw5cc", "-slave", "-I/x/y", "-Wa,-I,/q", "a$b"]


def test_variables(proj):
    cv = compiler_variables(proj)
    assert cv["SW5CC"] == "sw5cc" and cv["SWGCC"] == "swgcc" and list(cv) == sorted(cv)
    v = make_variables({"target": "sunway", "traget": "x", "batch": "4"}, str(proj))
    keys = [o.key for o in v.options]
    assert keys[:3] == ["target", "model", "verbose"] and {"SW5CC", "SWGCC", "batch", "ldm_reserve"} <= set(keys)
    env = Environment(tools=[], variables=v)
    assert env["target"] == "sunway" and env["model"] == "all" and env["batch"] == "4"
    assert v.UnknownVariables() == {"traget": "x"}
    text = v.GenerateHelpText(env)
    from swbuild.config.toolchain import available
    assert "|".join(available(proj)) in text and "fake-emu" in text and "(tiny|all)" in text


def test_toolpath_shim_restores_the_package():
    import importlib.util
    import sys
    real = sys.modules["swbuild"]
    spec = importlib.util.spec_from_file_location("swbuild", PACKAGE_DIR / "scons" / "swbuild.py")
    shim = importlib.util.module_from_spec(spec)
    sys.modules["swbuild"] = shim                # what SCons' tool loader does
    spec.loader.exec_module(shim)
    assert sys.modules["swbuild"] is real and shim.generate is tool.generate


def test_variant_names():
    from swbuild.driver.build import variant_name
    assert variant_name("vgg16", {}) == "vgg16"
    assert variant_name("vgg16", {"simd": "off", "batch": 2}) == "vgg16-batch2-simdoff"
    assert variant_name("m", {"rtol": 0.1, "atol": 1, "timeout": 5}) == "m"      # check-only
    assert variant_name("m", {"traffic_target": 1.5, "ldm_reserve": "auto"}) == "m-ldmreserveauto-traffictarget1.5"
