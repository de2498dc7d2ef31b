"""Tool-module shim so that

    Environment(tools=['default', 'swbuild'], toolpath=[PyPackageDir('swbuild.scons')])

works. SCons 4 imports a toolpath module under the tool's bare name, i.e. it stores this
file as sys.modules['swbuild'], hiding the real package; we put the package back and
re-export its tool functions.
"""
import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_me = sys.modules.get("swbuild")
if _me is not None and getattr(_me, "__file__", None) and os.path.abspath(_me.__file__) == os.path.abspath(__file__):
    del sys.modules["swbuild"]
    _tool = sys.modules.get("swbuild.scons")
    if _tool is not None:
        sys.modules["swbuild"] = _tool._PKG
    else:
        # SCons put the toolpath first on sys.path: hide it, or `swbuild` is this file again.
        saved = sys.path[:]
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
        try:
            _tool = importlib.import_module("swbuild.scons")
        finally:
            sys.path[:] = saved
else:
    _tool = importlib.import_module("swbuild.scons")

generate = _tool.generate
exists = _tool.exists
