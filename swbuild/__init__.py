"""swbuild: ahead-of-time compilation of ONNX models and C SCoPs for Sunway and DianNao."""

__version__ = "0.1.0"
