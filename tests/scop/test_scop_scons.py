"""env.SwScop: three outputs, up to date on a second run, regenerated when an included
header changes."""
import os
import shutil
import subprocess
import sys
import textwrap

from scop_helpers import KERNELS_DIR, ROOT


def scons(cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "SCons", "-Q"], cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_swscop_builder_outputs_and_header_scanning(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "inc").mkdir()
    shutil.copy(KERNELS_DIR / "gemm.c", tmp_path / "src" / "gemm.c")
    shutil.copy(KERNELS_DIR / "scop_util.h", tmp_path / "inc" / "scop_util.h")
    (tmp_path / "SConstruct").write_text(textwrap.dedent("""\
        from swbuild.scons.scop import add_scop_builder
        env = Environment(CPPPATH=['#inc'], CPPDEFINES=[('NI', 64), 'SYMBOLIC'])
        add_scop_builder(env)
        Default(env.SwScop('src/gemm.c'))
        """))
    out = scons(tmp_path)
    gen = tmp_path / "build" / "sunway-emu" / "scop"
    assert "SWSCOP src/gemm.c -> build/sunway-emu/scop" in out
    assert sorted(p.name for p in gen.iterdir()) == ["gemm_host.c", "gemm_scop.h", "gemm_slave.c"]
    assert "swk_a.ni = ni;" in (gen / "gemm_host.c").read_text()       # -DSYMBOLIC reached it
    assert "SWSCOP" not in scons(tmp_path)                               # up to date
    with open(tmp_path / "inc" / "scop_util.h", "a") as f:
        f.write("/* a header edit */\n")
    assert "SWSCOP src/gemm.c" in scons(tmp_path)                        # the C scanner saw it
