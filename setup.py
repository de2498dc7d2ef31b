"""Package list for setuptools; everything else is in pyproject.toml.

toolchains/ sits at the top of the repository (users copy and edit these files) and is
installed as the package `swbuild.toolchains_data`, so an installed swbuild finds its
targets. Automatic discovery cannot see a package mapped from another directory.

setuptools' own build tree goes to .setuptools-build/, not build/: build/ is where SCons
and swbuild put models (`pip install .` must not mix its build/lib into it).
"""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["swbuild", "swbuild.*"]) + ["swbuild.toolchains_data"],
    package_dir={"swbuild.toolchains_data": "toolchains"},
    options={"build": {"build_base": ".setuptools-build"}},
)
