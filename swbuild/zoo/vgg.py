"""VGG (Simonyan & Zisserman 2014), configuration D = VGG16, 224x224, logits output."""
from __future__ import annotations

from .registry import model
from .common import GraphBuilder

CFG_D = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def _vgg(name, cfg, batch, seed, classes=1000):
    gb = GraphBuilder(name, seed)
    x, c, stage, k = "data", 3, 1, 1
    for v in cfg:
        if v == "M":
            x = gb.node("MaxPool", [x], f"{name}/pool{stage}", kernel_shape=[2, 2], strides=[2, 2])
            stage, k = stage + 1, 1
            continue
        w = gb.weight(f"{name}/conv{stage}_{k}/weight", (v, c, 3, 3), c * 9)
        b = gb.bias(f"{name}/conv{stage}_{k}/bias", v)
        x = gb.node("Conv", [x, w, b], f"{name}/conv{stage}_{k}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = gb.node("Relu", [x], f"{name}/relu{stage}_{k}")
        c, k = v, k + 1
    x = gb.node("Flatten", [x], f"{name}/flatten", axis=1)
    fin = c * 7 * 7
    for i, n in enumerate((4096, 4096, classes)):
        w = gb.weight(f"{name}/fc{6 + i}/weight", (n, fin), fin)
        b = gb.bias(f"{name}/fc{6 + i}/bias", n)
        x = gb.node("Gemm", [x, w, b], f"{name}/fc{6 + i}", transB=1)
        if i < 2:
            x = gb.node("Relu", [x], f"{name}/relu{6 + i}")
            x = gb.node("Dropout", [x], f"{name}/drop{6 + i}")
        fin = n
    return gb.finish("data", [batch, 3, 224, 224], x, [batch, classes])


@model("vgg16", (3, 224, 224))
def vgg16(batch=1, seed=0):
    return _vgg("vgg16", CFG_D, batch, seed)
