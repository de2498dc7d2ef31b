"""Built-in model zoo: architectures built with onnx.helper and seeded weights.

Weights are drawn from numpy's PCG64 with a fixed seed (He initialisation, so activations
neither vanish nor explode through deep stacks): the same name, batch and seed always give
the same model bytes, on every machine.
"""
from __future__ import annotations

from ..support.errors import ModelError
from . import cache
from . import bert, dcgan, mobilenet, resnet, shufflenet, vgg, yolov3  # noqa: F401  (each registers its models)
from .registry import MODELS


def names():
    return sorted(MODELS)


def build(name, batch=1, seed=0):
    """ModelProto of zoo model `name` at the given batch size."""
    return build_model(name, batch, seed, cached=False).to_proto()


def build_model(name, batch=1, seed=0, cached=True):
    """Zoo model `name` as an ArrayModel (weights as numpy arrays): what the compiler imports.
    `cached`: from (and into) the zoo's model cache (cache.py; SWBUILD_ZOO_CACHE)."""
    if name not in MODELS:
        raise ModelError(f"unknown zoo model '{name}' (zoo: {', '.join(sorted(MODELS))})")
    if cached:
        m = cache.load(name, batch, seed)
        if m is not None:
            return m
    fn, _ = MODELS[name]
    m = fn(batch=batch, seed=seed)
    if cached:
        cache.store(name, batch, seed, m)
    return m
