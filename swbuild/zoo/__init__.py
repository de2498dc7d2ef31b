"""Built-in model zoo: architectures built with onnx.helper and seeded weights.

Weights are drawn from numpy's PCG64 with a fixed seed (He initialisation, so activations
neither vanish nor explode through deep stacks): the same name, batch and seed always give
the same model bytes, on every machine.
"""
from __future__ import annotations

from ..errors import ModelError

MODELS = {}


def model(name, input_shape):
    def deco(fn):
        MODELS[name] = (fn, input_shape)
        return fn
    return deco


def names():
    _load()
    return sorted(MODELS)


def build(name, batch=1, seed=0):
    """ModelProto of zoo model `name` at the given batch size."""
    _load()
    if name not in MODELS:
        raise ModelError(f"unknown zoo model '{name}' (zoo: {', '.join(sorted(MODELS))})")
    fn, _ = MODELS[name]
    return fn(batch=batch, seed=seed)


def _load():
    from . import vgg  # noqa: F401  (registration)
    from . import resnet  # noqa: F401
    from . import mobilenet  # noqa: F401
    from . import shufflenet  # noqa: F401
    from . import dcgan  # noqa: F401
    from . import yolov3  # noqa: F401
    from . import bert  # noqa: F401
