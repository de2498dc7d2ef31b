"""The version, in the lowest layer: generated files and caches record it."""

__version__ = "0.1.0"
