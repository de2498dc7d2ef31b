"""The swbuild SCons tool.

    import swbuild.scons
    env = Environment(tools=['default', swbuild.scons.generate], target='sunway-emu')
    built = env.SwModel('vgg16')        # build/sunway-emu/vgg16/: sources, lib, runner

or, with command-line variables, help and checks: `env = swbuild.scons.setup(ARGUMENTS)`.
See docs/scons.md.
"""
from __future__ import annotations

import sys

# The package itself (already imported: a parent loads before its subpackage), kept here for
# swbuild/scons/swbuild.py, which puts it back in sys.modules. No import: it is a higher layer.
_PKG = sys.modules[__name__.rpartition(".")[0]]

from .setup import setup  # noqa: F401
from .tool import DEFAULT_TARGET, SwModel, abort, exists, generate  # noqa: F401
