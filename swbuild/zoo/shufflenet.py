"""ShuffleNetV2 1.0x (Ma et al. 2018) as torchvision builds it, 224x224, logits output, ~2.3M
parameters. `chunk(2, dim=1)` is exported as Split with a constant `split` input (opset 13),
channel shuffle as Reshape -> Transpose -> Reshape with constant shapes, and the final
spatial mean as ReduceMean over axes 2, 3 - the way PyTorch's exporter writes them.
"""
from __future__ import annotations

from .registry import model
from .common import GraphBuilder, batchnorm, const, conv, node_n

STAGE_REPEATS = (4, 8, 4)
STAGE_CHANNELS = (24, 116, 232, 464, 1024)
# He init keeps the second moment through conv + ReLU when the conv's input comes out of a
# ReLU; after a BN without ReLU it would double it, and BN's random statistics add ~1.2x per
# layer, so those convs start smaller (the stack is 50 BNs deep and has no residual adds).
GAIN = 0.9
LINEAR_GAIN = 0.6


def _cb(gb, x, p, i, cin, cout, k, stride=1, group=1, relu=True, gain=GAIN):
    """Conv `{p}.{i}`, BN `{p}.{i+1}` and, with relu, ReLU `{p}.{i+2}`."""
    x = conv(gb, x, f"{p}.{i}", cin, cout, k, stride, group=group, gain=gain)
    x = batchnorm(gb, x, f"{p}.{i + 1}", cout)
    return gb.node("Relu", [x], f"{p}.{i + 2}") if relu else x


def _branch2(gb, x, p, cin, bf, stride):
    x = _cb(gb, x, p, 0, cin, bf, 1)
    x = _cb(gb, x, p, 3, bf, bf, 3, stride, group=bf, relu=False)
    return _cb(gb, x, p, 5, bf, bf, 1, gain=LINEAR_GAIN)


def _shuffle(gb, x, p, batch, c, hw):
    s1 = const(gb, f"{p}/shuffle/shape1", [batch, 2, c // 2, hw, hw])
    s2 = const(gb, f"{p}/shuffle/shape2", [batch, -1, hw, hw])
    x = gb.node("Reshape", [x, s1], f"{p}/shuffle/view")
    x = gb.node("Transpose", [x], f"{p}/shuffle/transpose", perm=[0, 2, 1, 3, 4])
    return gb.node("Reshape", [x, s2], f"{p}/shuffle/reshape")


def _unit(gb, x, p, batch, cin, cout, stride, hw):
    bf = cout // 2
    if stride > 1:
        a = _cb(gb, x, f"{p}/branch1", 0, cin, cin, 3, stride, group=cin, relu=False)
        a = _cb(gb, a, f"{p}/branch1", 2, cin, bf, 1, gain=LINEAR_GAIN)
        b = _branch2(gb, x, f"{p}/branch2", cin, bf, stride)
        hw //= 2
    else:
        split = const(gb, f"{p}/chunk/split", [bf, bf])
        a, b = node_n(gb, "Split", [x, split], f"{p}/chunk", 2, axis=1)
        b = _branch2(gb, b, f"{p}/branch2", bf, bf, 1)
    x = gb.node("Concat", [a, b], f"{p}/cat", axis=1)
    return _shuffle(gb, x, p, batch, cout, hw), hw


@model("shufflenet", (3, 224, 224))
def shufflenet(batch=1, seed=0, classes=1000):
    name = "shufflenet"
    gb = GraphBuilder(name, seed)
    c = STAGE_CHANNELS[0]
    x = _cb(gb, "data", f"{name}/conv1", 0, 3, c, 3, 2)
    x = gb.node("MaxPool", [x], f"{name}/maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    hw = 56
    for s, (n, cout) in enumerate(zip(STAGE_REPEATS, STAGE_CHANNELS[1:4])):
        for i in range(n):
            x, hw = _unit(gb, x, f"{name}/stage{s + 2}.{i}", batch, c, cout, 2 if i == 0 else 1, hw)
            c = cout
    x = _cb(gb, x, f"{name}/conv5", 0, c, STAGE_CHANNELS[4], 1)
    x = gb.node("ReduceMean", [x], f"{name}/mean", axes=[2, 3], keepdims=0)
    w = gb.weight(f"{name}/fc/weight", (classes, STAGE_CHANNELS[4]), STAGE_CHANNELS[4])
    b = gb.bias(f"{name}/fc/bias", classes)
    x = gb.node("Gemm", [x, w, b], f"{name}/fc", alpha=1.0, beta=1.0, transB=1)
    return gb.finish("data", [batch, 3, 224, 224], x, [batch, classes])
