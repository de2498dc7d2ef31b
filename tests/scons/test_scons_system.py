"""System tests: `python -m SCons` in a tmp project, with a fake swbuild CLI (SWCLI=...)
and a project-local gcc target, so they test the tool and not the compiler."""
import os
import shutil

from scons_project import gen_runs, run_scons

from swbuild.driver.build import generated_files

OUT = "build/fake-emu/tiny"


def built_ok(p, r):
    assert r.returncode == 0, r.stdout + r.stderr
    for name in generated_files("tiny").values():
        assert (p / OUT / name).is_file(), name
    assert (p / OUT / "libtiny.a").is_file() and os.access(p / OUT / "tiny_runner", os.X_OK)


def test_build_then_up_to_date(fake_project):
    p = fake_project
    r = run_scons(p, "-Q", "target=fake-emu", "model=tiny")
    built_ok(p, r)
    assert f"SWGEN tiny -> {OUT}" in r.stdout and "LINK tiny_runner" in r.stdout
    assert "gcc " not in r.stdout                     # concise by default
    assert gen_runs(p) == [f"compile --recipe recipes/tiny.yaml --target fake-emu -o {OUT}"]
    r = run_scons(p, "-Q", "target=fake-emu")
    assert r.returncode == 0 and "is up to date" in r.stdout and "SWGEN" not in r.stdout
    assert run_scons(p, "-q", "target=fake-emu").returncode == 0
    # touching inputs changes no content: nothing to do
    for f in ("recipes/tiny.yaml", "models/tiny.onnx", "toolchains/fake-emu.toml", "SConstruct"):
        os.utime(p / f)
    assert run_scons(p, "-q", "target=fake-emu").returncode == 0
    assert len(gen_runs(p)) == 1


def test_regenerates_on_recipe_option_and_toolchain_changes(fake_project):
    p = fake_project
    built_ok(p, run_scons(p, "-Q", "target=fake-emu"))
    rec = p / "recipes" / "tiny.yaml"
    rec.write_text(rec.read_text().replace("rtol: 1e-3", "rtol: 1e-2"))
    assert run_scons(p, "-q", "target=fake-emu").returncode != 0
    r = run_scons(p, "-Q", "target=fake-emu")
    assert "SWGEN tiny" in r.stdout and len(gen_runs(p)) == 2
    # regenerated but identical C is not recompiled (content decider)
    assert "CC-HOST tiny_host.c" not in r.stdout

    r = run_scons(p, "-Q", "target=fake-emu", "batch=2")
    assert r.returncode == 0 and "SWGEN tiny -> build/fake-emu/tiny-batch2" in r.stdout
    assert "CC-HOST tiny_host.c" in r.stdout
    assert gen_runs(p)[-1].endswith("--set batch=2")
    assert run_scons(p, "-q", "target=fake-emu", "batch=2").returncode == 0
    assert run_scons(p, "-q", "target=fake-emu", "batch=2", "verbose=1").returncode == 0

    tc = p / "toolchains" / "fake-emu.toml"
    tc.write_text(tc.read_text().replace('host = ["-O1"]', 'host = ["-O2"]'))
    r = run_scons(p, "-Q", "target=fake-emu", "batch=2")
    assert "SWGEN tiny" in r.stdout and "CC-HOST tiny_host.c" in r.stdout
    assert len(gen_runs(p)) == 4

    # the model file is a dependency too (scanner): new bytes regenerate (and the real
    # compiler then reports the sha256 pin mismatch)
    m = p / "models" / "tiny.onnx"
    m.write_bytes(m.read_bytes().replace(b"tiny", b"tinx"))
    assert run_scons(p, "-q", "target=fake-emu", "batch=2").returncode != 0


def test_verbose_prints_commands(fake_project):
    r = run_scons(fake_project, "-Q", "target=fake-emu", "verbose=1", "simd=off")
    assert r.returncode == 0, r.stderr
    assert ("fakecli.py compile --recipe recipes/tiny.yaml --target fake-emu -o build/fake-emu/tiny-simdoff "
            "--set simd=off") in r.stdout
    # SCons' own C builders: $CCCOM with the target's flags first
    assert ("gcc -o build/fake-emu/tiny-simdoff/tiny_host.o -c -O1 -DSWEMU_API_V1 -Ibuild/fake-emu/tiny-simdoff "
            "build/fake-emu/tiny-simdoff/tiny_host.c") in r.stdout
    # a thin archive: the members (the weights object above all) are not copied into it
    assert "ar rcsDT build/fake-emu/tiny-simdoff/libtiny.a build/fake-emu/tiny-simdoff/tiny_host.o" in r.stdout
    assert "SWGEN" not in r.stdout


def test_parallel_build_and_check_alias(fake_project):
    p = fake_project
    r = run_scons(p, "-Q", "-j", "2", "target=fake-emu", "check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHECK tiny (fake-emu)" in r.stdout and "fakecheck: build/fake-emu/tiny/tiny_runner exit 0" in r.stdout
    runs = (p / "gen.log").read_text().splitlines()
    assert runs[-1] == ("check --recipe recipes/tiny.yaml --target fake-emu --runner build/fake-emu/tiny/tiny_runner"
                        " -o build/fake-emu/tiny --result build/fake-emu/tiny/tiny.check.json")
    assert (p / OUT / "tiny.check.json").is_file()
    # the check result is a target: up to date until the runner (or the recipe, ...) changes
    r = run_scons(p, "-Q", "target=fake-emu", "check")
    assert r.returncode == 0 and "CHECK tiny" not in r.stdout and "SWGEN" not in r.stdout
    r = run_scons(p, "-Q", "-q", "target=fake-emu", "check")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    (p / OUT / "tiny_runner").unlink()
    r = run_scons(p, "-Q", "-q", "target=fake-emu", "check")
    assert r.returncode == 1 and "tiny_runner' is out of date: it does not exist" in r.stdout
    r = run_scons(p, "-Q", "target=fake-emu", "check")    # relinked, the same bytes: no new check
    assert "LINK tiny_runner" in r.stdout and "CHECK tiny" not in r.stdout
    rec = p / "recipes" / "tiny.yaml"
    rec.write_text(rec.read_text().replace("rtol: 1e-3", "rtol: 1e-2"))
    assert "CHECK tiny" in run_scons(p, "-Q", "target=fake-emu", "check").stdout
    # options that change the build get their own directory
    r = run_scons(p, "-Q", "target=fake-emu", "report-tiny", "seed=3")
    assert r.returncode == 0 and "REPORT tiny (fake-emu)" in r.stdout
    assert (p / "gen.log").read_text().splitlines()[-1].endswith("--set seed=3")
    assert (p / "build/fake-emu/tiny-seed3/tiny.report.json").is_file()


def test_missing_cross_compiler_fails_after_generating(fake_project):
    p = fake_project
    for extra in ([], ["SW5CC=/nonexistent/sw5cc"], ["-j", "2"]):
        r = run_scons(p, "-Q", "target=sunway", *extra)
        out = r.stdout + r.stderr
        assert r.returncode != 0
        assert "compiler 'sw5cc' not found" in r.stderr and "SW5CC=/path/to/sw5cc" in r.stderr
        assert r.stderr.count("swbuild: error:") == 1 and "Traceback" not in out
        for name in generated_files("tiny").values():
            assert (p / "build/sunway/tiny" / name).is_file()
        assert not list((p / "build/sunway/tiny").glob("*.o"))
    assert "/nonexistent/sw5cc is not an executable" in run_scons(p, "-Q", "target=sunway", "SW5CC=/nonexistent/sw5cc").stderr


def test_fake_cross_compiler_given_by_variable(fake_project, tmp_path):
    # SW5CC=/path makes the sunway target compile with it (here: a gcc wrapper).
    p = fake_project
    sw5cc = tmp_path / "bin" / "sw5cc"
    sw5cc.parent.mkdir()
    sw5cc.write_text('#!/bin/sh\n# drop the sw5cc-only side flags\nfor a; do shift; case "$a" in '
                     '-host|-slave|-hybrid|-msimd|-static|-lm_slave) ;; *) set -- "$@" "$a";; esac; done\nexec gcc "$@"\n')
    sw5cc.chmod(0o755)
    (tmp_path / "bin" / "swar").symlink_to(shutil.which("ar"))
    r = run_scons(p, "-Q", "target=sunway", f"SW5CC={sw5cc}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.access(p / "build/sunway/tiny/tiny_runner", os.X_OK)
    # the compiler's absolute path stays out of the signatures
    assert run_scons(p, "-q", "target=sunway", f"SW5CC={sw5cc}").returncode == 0


def test_bad_variables_fail_clearly(fake_project):
    p = fake_project
    r = run_scons(p, "-Q", "traget=sunway")
    assert r.returncode == 2 and "unknown variable(s): traget=sunway (did you mean target=?)" in r.stderr
    assert "Traceback" not in r.stderr and not (p / "build").exists()
    r = run_scons(p, "-Q", "target=sunwy")
    assert r.returncode == 2 and "sunwy" in r.stderr and "fake-emu" in r.stderr
    r = run_scons(p, "-Q", "model=nope")
    assert r.returncode == 2 and "'nope'" in r.stderr and "tiny" in r.stderr
    r = run_scons(p, "-Q", "batch=0")
    assert r.returncode == 2 and "bad value batch=0; allowed: an integer >= 1" in r.stderr
    rec = (p / "recipes" / "tiny.yaml").read_text()
    (p / "recipes" / "tiny.yaml").write_text(rec + "targets: [fake-emu, sunway]\n")
    r = run_scons(p, "-Q", "target=sunway-emu")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no recipe in" in r.stderr and "allows target=sunway-emu" in r.stderr and "tiny: fake-emu, sunway" in r.stderr
    (p / "recipes" / "tiny.yaml").write_text("model: tiny\nsource: {zoo: x, onnx: y}\n")
    r = run_scons(p, "-Q", "target=fake-emu")
    assert r.returncode == 2 and "recipes/tiny.yaml:2: source: give exactly one" in r.stderr
    assert "Traceback" not in r.stderr


def test_help_lists_targets_models_options(fake_project):
    r = run_scons(fake_project, "-h")
    assert r.returncode == 0
    for text in ("target:", "fake-emu|sunway|sunway-emu|", "model:", "(tiny|all)", "verbose:", "SW5CC:",
                 "batch:", "partition:", "ldm_reserve:", "check "):
        assert text in r.stdout, text


def test_moved_project_and_cachedir(fake_project, tmp_path):
    p = fake_project
    cache = tmp_path / "cache"
    built_ok(p, run_scons(p, "-Q", "target=fake-emu", env={"SWBUILD_CACHEDIR": str(cache)}))
    # a copy in another directory is still up to date: no absolute paths in signatures
    q = tmp_path / "elsewhere" / "proj"
    shutil.copytree(p, q, symlinks=True)
    assert run_scons(q, "-q", "target=fake-emu").returncode == 0
    # a clean tree elsewhere fills itself from the shared cache, except the generator
    # (its outputs come from the cache too)
    shutil.rmtree(q / "build")
    (q / ".sconsign.dblite").unlink()
    r = run_scons(q, "-Q", "target=fake-emu", env={"SWBUILD_CACHEDIR": str(cache)})
    assert r.returncode == 0 and "Retrieved" in r.stdout and "LINK" not in r.stdout, r.stdout
    assert os.access(q / OUT / "tiny_runner", os.X_OK)
