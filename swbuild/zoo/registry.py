"""The zoo's models by name: each architecture module registers its builder with `model`."""
from __future__ import annotations

MODELS = {}     # name -> (builder(batch, seed), input shape)


def model(name, input_shape):
    def deco(fn):
        MODELS[name] = (fn, input_shape)
        return fn
    return deco
