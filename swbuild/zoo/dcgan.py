"""DCGAN generator (Radford et al. 2015) as the PyTorch example builds it: nz=100, ngf=64,
input noise [N, 100, 1, 1] -> image [N, 3, 64, 64]. ConvTranspose (no bias) + BatchNorm +
Relu four times, then ConvTranspose + Tanh; ~3.6M parameters.
"""
from __future__ import annotations

from .registry import model
from .common import GraphBuilder, batchnorm, he

NZ, NGF, NC = 100, 64, 3


def _deconv(gb, x, name, cin, cout, stride, pad, fan_in, gain=1.0):
    w = he(gb, f"{name}/weight", (cin, cout, 4, 4), fan_in, gain)
    return gb.node("ConvTranspose", [x, w], name, kernel_shape=[4, 4], strides=[stride, stride],
                   pads=[pad] * 4, dilations=[1, 1], group=1)


@model("dcgan", (NZ, 1, 1))
def dcgan(batch=1, seed=0):
    name = "dcgan"
    gb = GraphBuilder(name, seed)
    x, c, i = "data", NZ, 0
    for cout, stride, pad in ((NGF * 8, 1, 0), (NGF * 4, 2, 1), (NGF * 2, 2, 1), (NGF, 2, 1)):
        # fan-in of one output pixel: the 1x1 noise gives each of the 4x4 taps its own output;
        # a stride-2 4x4 transposed conv feeds each output from 2x2 taps of every channel
        x = _deconv(gb, x, f"{name}/main.{i}", c, cout, stride, pad, c if stride == 1 else c * 4)
        x = batchnorm(gb, x, f"{name}/main.{i + 1}", cout)
        x = gb.node("Relu", [x], f"{name}/main.{i + 2}")
        c, i = cout, i + 3
    # half gain on the last layer: Tanh sees values of ~unit size instead of saturating
    x = _deconv(gb, x, f"{name}/main.{i}", c, NC, 2, 1, c * 4, gain=0.5)
    x = gb.node("Tanh", [x], f"{name}/main.{i + 1}")
    return gb.finish("data", [batch, NZ, 1, 1], x, [batch, NC, 64, 64])
