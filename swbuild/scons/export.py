"""The `export` and `export-<model>` aliases: <build dir>/<target>/<model>/<prefix>-<target>.tar,
the archive `swbuild export` writes (swbuild/driver/export.py), made from the sources SCons already
generated, so exporting an up-to-date build costs one archive and no code generation."""
from __future__ import annotations

from SCons.Action import Action


def _archive(target, source, env):
    """A function action without a closure: SCons signs its code and the varlist values."""
    from swbuild.driver.export import export
    export(target[0].dir.abspath, env["SWBUILD_TOOLCHAIN"], env["SWBUILD_PREFIX"], target[0].abspath)


def add_export(env, tc, out, prefix, model, sources):
    env.SetDefault(SWEXPORTCOMSTR="EXPORT $TARGET")
    tar = env.Command(out.File(f"{prefix}-{tc.name}.tar"), sources,
                      Action(_archive, "$SWEXPORTCOMSTR", varlist=["SWBUILD_TARGET", "SWBUILD_PREFIX"]),
                      SWBUILD_PREFIX=prefix)
    deps = [tc.path]
    if tc.emulated:     # the archive carries the emulation runtime
        deps += [p for d in tc.runtime_include_dirs() for p in sorted(d.rglob("*")) if p.is_file()]
        deps += [p for s in tc.runtime_sources()[:1] for p in sorted(s.parent.iterdir()) if p.suffix in (".c", ".h")]
    env.Depends(tar, [env.File(str(p)) for p in deps])
    env.Alias("export", env.Alias(f"export-{model}", tar))
    return tar
