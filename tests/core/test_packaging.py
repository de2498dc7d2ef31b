"""`pip install .` must ship what an installed swbuild needs beside its Python code."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def pristine_copy(dest):
    """The project's files as a fresh clone has them (tracked + new, not ignored): no build/
    or egg-info left by earlier builds, which setuptools would otherwise reuse."""
    r = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True)
    if r.returncode != 0:     # not a git checkout (an unpacked sdist): build it as it is
        return REPO
    for rel in filter(None, r.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_wheel_ships_toolchains_and_runtimes(tmp_path):
    src = pristine_copy(tmp_path / "src")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    # setuptools' complaints (license as a table, data folders missing from `packages`) are
    # printed by the build backend, which pip shows with -v
    noisy = [ln.strip() for ln in (r.stdout + r.stderr).splitlines()
             if "SetuptoolsDeprecationWarning" in ln or "is absent from the `packages`" in ln]
    assert not noisy, noisy
    if src != REPO:   # setuptools' build tree must not land in the project's build/ (swbuild's outputs)
        assert not (src / "build").exists(), sorted(p.name for p in (src / "build").iterdir())
    wheel = next(tmp_path.glob("swbuild-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for t in REPO.glob("toolchains/*.toml"):
        assert f"swbuild/toolchains_data/{t.name}" in names
    for f in ("swbuild/runtime/athread/include/athread.h", "swbuild/runtime/athread/src/dma.c",
              "swbuild/runtime/athread/include/crts.h", "swbuild/runtime/bang/include/bang.h"):
        assert f in names, f
    # every Python module of the package, subpackages included (a folder without __init__.py
    # is a namespace package that setuptools' find_packages silently leaves out)
    missing = sorted(str(f.relative_to(REPO)) for f in (REPO / "swbuild").rglob("*.py")
                     if "__pycache__" not in f.parts and str(f.relative_to(REPO)) not in names)
    assert not missing, missing
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "swbuild = swbuild.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()
