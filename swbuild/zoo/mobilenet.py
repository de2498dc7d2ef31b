"""MobileNetV2 (Sandler et al. 2018) as torchvision builds it, width 1.0, 224x224, logits
output, ~3.5M parameters. ReLU6 is exported as Clip(min=0, max=6) with constant inputs, the
way PyTorch's exporter writes it at opset 13; depthwise convolutions are Conv with group=C.
"""
from __future__ import annotations

import numpy as np

from .registry import model
from .common import GraphBuilder, batchnorm, const, conv

# expansion t, output channels c, repeats n, first stride s
SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1)]
RESIDUAL_GAMMA = 0.3


def _cbr(gb, x, p, cin, cout, k, stride=1, group=1, act=True, gamma=1.0):
    """Conv2dNormActivation: Conv `{p}.0`, BN `{p}.1`, ReLU6 `{p}.2`."""
    x = conv(gb, x, f"{p}.0", cin, cout, k, stride, group=group)
    x = batchnorm(gb, x, f"{p}.1", cout, gamma=gamma)
    if act:
        x = gb.node("Clip", [x, "mobilenet/relu6/min", "mobilenet/relu6/max"], f"{p}.2")
    return x


@model("mobilenet", (3, 224, 224))
def mobilenet(batch=1, seed=0, classes=1000):
    name = "mobilenet"
    gb = GraphBuilder(name, seed)
    const(gb, f"{name}/relu6/min", 0.0, np.float32)
    const(gb, f"{name}/relu6/max", 6.0, np.float32)
    x = _cbr(gb, "data", f"{name}/features.0", 3, 32, 3, 2)
    c, idx = 32, 1
    for t, cout, n, s in SETTINGS:
        for i in range(n):
            stride = s if i == 0 else 1
            p, hidden, y, j = f"{name}/features.{idx}/conv", c * t, x, 0
            if t != 1:
                y = _cbr(gb, y, f"{p}.0", c, hidden, 1)
                j = 1
            y = _cbr(gb, y, f"{p}.{j}", hidden, hidden, 3, stride, group=hidden)
            y = conv(gb, y, f"{p}.{j + 1}", hidden, cout, 1)
            use_res = stride == 1 and c == cout
            y = batchnorm(gb, y, f"{p}.{j + 2}", cout, gamma=RESIDUAL_GAMMA if use_res else 1.0)
            if use_res:
                y = gb.node("Add", [x, y], f"{name}/features.{idx}/add")
            x, c, idx = y, cout, idx + 1
    x = _cbr(gb, x, f"{name}/features.{idx}", c, 1280, 1)
    x = gb.node("GlobalAveragePool", [x], f"{name}/avgpool")
    x = gb.node("Flatten", [x], f"{name}/flatten", axis=1)
    x = gb.node("Dropout", [x], f"{name}/classifier.0")
    w = gb.weight(f"{name}/classifier.1/weight", (classes, 1280), 1280)
    b = gb.bias(f"{name}/classifier.1/bias", classes)
    x = gb.node("Gemm", [x, w, b], f"{name}/classifier.1", alpha=1.0, beta=1.0, transB=1)
    return gb.finish("data", [batch, 3, 224, 224], x, [batch, classes])
