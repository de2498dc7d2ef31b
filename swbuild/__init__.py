"""swbuild: ahead-of-time compilation of ONNX models and C SCoPs for Sunway and DianNao.

The Python API (docs/api.md), imported on first use so that `import swbuild` stays cheap:

    import swbuild
    r = swbuild.check("model.onnx", target="sunway-emu")
    print(r.status)

swbuild.compile, swbuild.check, swbuild.report, swbuild.run, swbuild.load_recipe and their
result types (CompileResult, CheckResult, ReportResult, RunResult) live in swbuild/api/.
"""
import importlib

from .support.version import __version__  # noqa: F401

__all__ = ["compile", "check", "report", "run", "load_recipe", "CompileResult", "CheckResult", "ReportResult",
           "RunResult", "__version__"]


def __getattr__(name):
    if name in __all__:
        return getattr(importlib.import_module("swbuild.api"), name)
    raise AttributeError(f"module 'swbuild' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
