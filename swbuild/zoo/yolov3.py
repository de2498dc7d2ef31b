"""YOLOv3 (Redmon & Farhadi 2018) at 416x416: Darknet-53 backbone and three detection heads at
strides 32, 16 and 8 (13x13, 26x26, 52x52), each 3 anchors x (5 + 80 classes) = 255 channels;
~62M parameters. Every conv is Conv (no bias) + BatchNormalization + LeakyRelu(0.1) except the
three 1x1 prediction convs (bias, linear). The coarse branches are upsampled with Resize
(nearest, scale 2, the form PyTorch's exporter writes at opset 13) and concatenated with the
backbone's route features. The graph outputs are the three raw head tensors, unactivated and
undecoded.

The last BatchNormalization of every residual block starts with a small scale so the identity
path dominates (23 residual blocks).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .registry import model
from .common import GraphBuilder, batchnorm, const, conv, finish_io

SIZE = 416
OUT_CH = 3 * (5 + 80)
BLOCKS = (1, 2, 8, 8, 4)
RESIDUAL_GAMMA = 0.2
# He init keeps the second moment through conv + activation when the conv reads an activation's
# output; BN's random statistics add ~1.2x per layer (GAIN compensates), and a conv that reads a
# residual sum would double it (SUM_GAIN), so those start smaller.
GAIN = 0.9
SUM_GAIN = 0.65


def _cbl(gb, x, p, cin, cout, k, stride=1, gamma=1.0, gain=GAIN):
    x = conv(gb, x, f"{p}/conv", cin, cout, k, stride, gain=gain)
    x = batchnorm(gb, x, f"{p}/bn", cout, gamma=gamma)
    return gb.node("LeakyRelu", [x], f"{p}/act", alpha=0.1)


def _darknet53(gb, x, p):
    """Returns the stride-8, stride-16 and stride-32 features (256, 512, 1024 channels)."""
    x = _cbl(gb, x, f"{p}/conv0", 3, 32, 3)
    c, routes = 32, []
    for s, n in enumerate(BLOCKS):
        x = _cbl(gb, x, f"{p}/stage{s + 1}.down", c, c * 2, 3, 2, gain=GAIN if s == 0 else SUM_GAIN)
        c *= 2
        for i in range(n):
            q = f"{p}/stage{s + 1}.{i}"
            y = _cbl(gb, x, f"{q}/conv1", c, c // 2, 1, gain=GAIN if i == 0 else SUM_GAIN)
            y = _cbl(gb, y, f"{q}/conv2", c // 2, c, 3, gamma=RESIDUAL_GAMMA)
            x = gb.node("Add", [x, y], f"{q}/add")
        routes.append(x)
    return routes[2:]


def _head(gb, x, p, cin, c, gain0):
    """Five alternating 1x1/3x3 CBLs (the route goes on from the fifth), 3x3 CBL, 1x1 prediction."""
    for i in range(5):
        x = _cbl(gb, x, f"{p}/convset.{i}", cin if i == 0 else (c if i % 2 else c * 2),
                 c if i % 2 == 0 else c * 2, 1 if i % 2 == 0 else 3, gain=gain0 if i == 0 else GAIN)
    route = x
    y = _cbl(gb, x, f"{p}/conv", c, c * 2, 3)
    y = conv(gb, y, f"{p}/pred", c * 2, OUT_CH, 1, bias=True)
    return route, y


def _up(gb, x, p, cin, cout, scales):
    x = _cbl(gb, x, f"{p}/conv", cin, cout, 1)
    return gb.node("Resize", [x, "", scales], f"{p}/upsample", mode="nearest",
                   coordinate_transformation_mode="asymmetric", nearest_mode="floor", cubic_coeff_a=-0.75)


@model("yolov3", (3, SIZE, SIZE))
def yolov3(batch=1, seed=0):
    name = "yolov3"
    gb = GraphBuilder(name, seed)
    scales = const(gb, f"{name}/upsample/scales", [1.0, 1.0, 2.0, 2.0], np.float32)
    c3, c4, c5 = _darknet53(gb, "data", f"{name}/backbone")
    r, out1 = _head(gb, c5, f"{name}/head1", 1024, 512, SUM_GAIN)
    x = _up(gb, r, f"{name}/route2", 512, 256, scales)
    x = gb.node("Concat", [x, c4], f"{name}/route2/cat", axis=1)
    r, out2 = _head(gb, x, f"{name}/head2", 256 + 512, 256, SUM_GAIN)
    x = _up(gb, r, f"{name}/route3", 256, 128, scales)
    x = gb.node("Concat", [x, c3], f"{name}/route3/cat", axis=1)
    _, out3 = _head(gb, x, f"{name}/head3", 128 + 256, 128, SUM_GAIN)
    f = TensorProto.FLOAT
    return finish_io(gb, [("data", f, [batch, 3, SIZE, SIZE])],
                     [(out1, f, [batch, OUT_CH, SIZE // 32, SIZE // 32]),
                      (out2, f, [batch, OUT_CH, SIZE // 16, SIZE // 16]),
                      (out3, f, [batch, OUT_CH, SIZE // 8, SIZE // 8])])
