"""The swbuild SCons tool.

    import swbuild.scons
    env = Environment(tools=['default', swbuild.scons.generate], target='sunway-emu')
    built = env.SwModel('vgg16')        # build/sunway-emu/vgg16/: sources, lib, runner

or, with command-line variables, help and checks: `env = swbuild.scons.setup(ARGUMENTS)`.
See docs/scons.md.
"""
from __future__ import annotations

import swbuild as _PKG  # noqa: F401  (swbuild/scons/swbuild.py puts it back in sys.modules)

from .setup import setup  # noqa: F401
from .tool import DEFAULT_TARGET, SwModel, abort, exists, generate  # noqa: F401
