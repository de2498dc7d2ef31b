"""swbuild: ahead-of-time compilation of ONNX models and C SCoPs for Sunway and DianNao."""

from .support.version import __version__  # noqa: F401
