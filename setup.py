"""Package list for setuptools; everything else is in pyproject.toml.

toolchains/ sits at the top of the repository (users copy and edit these files) and is
installed as the package `swbuild.toolchains_data`, so an installed swbuild finds its
targets. Automatic discovery cannot see a package mapped from another directory.

The runtimes' C folders (swbuild/runtime/athread/include, ...) have no __init__.py: they
are listed as namespace packages so their package data ships without setuptools warning
that an importable folder is missing from `packages`.

setuptools' own build tree goes to a temporary directory: the project's build/ belongs to
swbuild's outputs (build/<target>/<model>/), and `pip install .` must leave nothing there.
"""
import atexit
import shutil
import tempfile

from setuptools import find_namespace_packages, setup

_build_base = tempfile.mkdtemp(prefix="swbuild-setuptools-")
atexit.register(shutil.rmtree, _build_base, True)

setup(
    packages=find_namespace_packages(include=["swbuild", "swbuild.*"], exclude=["*.__pycache__"])
    + ["swbuild.toolchains_data"],
    package_dir={"swbuild.toolchains_data": "toolchains"},
    options={"build": {"build_base": _build_base}, "bdist_wheel": {"bdist_dir": _build_base + "/bdist"}},
)
