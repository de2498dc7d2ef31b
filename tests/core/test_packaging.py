"""`pip install .` must ship what an installed swbuild needs beside its Python code."""
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_ships_toolchains_and_runtimes(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("swbuild-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for t in REPO.glob("toolchains/*.toml"):
        assert f"swbuild/toolchains_data/{t.name}" in names
    for f in ("swbuild/runtime/athread/include/athread.h", "swbuild/runtime/athread/src/dma.c",
              "swbuild/runtime/athread/include/crts.h", "swbuild/runtime/bang/include/bang.h"):
        assert f in names, f
    assert any(n.startswith("swbuild/optimizer/polyhedral/") for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "swbuild = swbuild.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()
