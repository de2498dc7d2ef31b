"""ResNet (He et al. 2015) as torchvision builds it (v1.5: the stride sits in the 3x3 conv of a
bottleneck), 224x224, logits output. resnet18 (basic blocks, ~11.7M parameters) and resnet50
(bottlenecks, ~25.6M).

The last BatchNormalization of every residual branch starts with a small scale (as
`zero_init_residual` would, but not zero) so the identity path dominates and activations stay
in range through the stack; BN statistics are otherwise non-trivial so folding is tested.
"""
from __future__ import annotations

from .registry import model
from .common import GraphBuilder, batchnorm, conv

RESIDUAL_GAMMA = 0.2


def _cbr(gb, x, name, bn_name, cin, cout, k, stride=1, relu=True, gamma=1.0):
    x = conv(gb, x, name, cin, cout, k, stride)
    x = batchnorm(gb, x, bn_name, cout, gamma=gamma)
    return gb.node("Relu", [x], f"{name}/relu") if relu else x


def _basic(gb, x, p, cin, planes, stride):
    y = _cbr(gb, x, f"{p}/conv1", f"{p}/bn1", cin, planes, 3, stride)
    y = _cbr(gb, y, f"{p}/conv2", f"{p}/bn2", planes, planes, 3, relu=False, gamma=RESIDUAL_GAMMA)
    if stride != 1 or cin != planes:
        x = _cbr(gb, x, f"{p}/downsample.0", f"{p}/downsample.1", cin, planes, 1, stride, relu=False)
    y = gb.node("Add", [y, x], f"{p}/add")
    return gb.node("Relu", [y], f"{p}/relu"), planes


def _bottleneck(gb, x, p, cin, planes, stride):
    out = planes * 4
    y = _cbr(gb, x, f"{p}/conv1", f"{p}/bn1", cin, planes, 1)
    y = _cbr(gb, y, f"{p}/conv2", f"{p}/bn2", planes, planes, 3, stride)
    y = _cbr(gb, y, f"{p}/conv3", f"{p}/bn3", planes, out, 1, relu=False, gamma=RESIDUAL_GAMMA)
    if stride != 1 or cin != out:
        x = _cbr(gb, x, f"{p}/downsample.0", f"{p}/downsample.1", cin, out, 1, stride, relu=False)
    y = gb.node("Add", [y, x], f"{p}/add")
    return gb.node("Relu", [y], f"{p}/relu"), out


def _resnet(name, block, layers, batch, seed, classes=1000):
    gb = GraphBuilder(name, seed)
    x = _cbr(gb, "data", f"{name}/conv1", f"{name}/bn1", 3, 64, 7, 2)
    x = gb.node("MaxPool", [x], f"{name}/maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for i, (n, planes) in enumerate(zip(layers, (64, 128, 256, 512))):
        for j in range(n):
            stride = 2 if (i > 0 and j == 0) else 1
            x, c = block(gb, x, f"{name}/layer{i + 1}.{j}", c, planes, stride)
    x = gb.node("GlobalAveragePool", [x], f"{name}/avgpool")
    x = gb.node("Flatten", [x], f"{name}/flatten", axis=1)
    w = gb.weight(f"{name}/fc/weight", (classes, c), c)
    b = gb.bias(f"{name}/fc/bias", classes)
    x = gb.node("Gemm", [x, w, b], f"{name}/fc", alpha=1.0, beta=1.0, transB=1)
    return gb.finish("data", [batch, 3, 224, 224], x, [batch, classes])


@model("resnet18", (3, 224, 224))
def resnet18(batch=1, seed=0):
    return _resnet("resnet18", _basic, (2, 2, 2, 2), batch, seed)


@model("resnet50", (3, 224, 224))
def resnet50(batch=1, seed=0):
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), batch, seed)
