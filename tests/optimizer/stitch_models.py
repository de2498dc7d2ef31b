"""Small models with a producer that buffer stitching may recompute in its consumer's LDM
(backends/sunway/passes/stitch_producers.py): an Inception-like pool branch and a DenseNet-like
BatchNormalization + Relu on a Concat feeding a 1x1 convolution."""
from onnx import helper

from onnx_builders import make, rand


def conv(x, y, w, k=1, s=1):
    return helper.make_node("Conv", [x, w], [y], strides=[s, s], pads=[k // 2] * 4)


def pool_branch(c=16, hw=14, kind="MaxPool", stride=1, pads=1, co=None):
    """1x1 and 3x3 branches and a pool branch (3x3 pool -> 1x1) into a Concat, then a 1x1."""
    co = co or c
    attrs = {"count_include_pad": 0} if kind == "AveragePool" else {}
    pool = helper.make_node(kind, ["a"], ["pl"], kernel_shape=[3, 3], strides=[stride, stride], pads=[pads] * 4,
                            **attrs)
    ph = (hw + 2 * pads - 3) // stride + 1
    nodes = [conv("x", "a0", "w0", 3), helper.make_node("Relu", ["a0"], ["a"]), pool, conv("pl", "r0", "w3"),
             helper.make_node("Relu", ["r0"], ["r"])]
    inits = [("w0", rand(c, 3, 3, 3, seed=1, scale=0.3)), ("w3", rand(co, c, 1, 1, seed=4, scale=0.3))]
    if ph == hw:
        nodes += [conv("a", "p", "w1"), conv("a", "q", "w2", 3),
                  helper.make_node("Concat", ["p", "q", "r"], ["cat"], axis=1), conv("cat", "y", "w4")]
        inits += [("w1", rand(c, c, 1, 1, seed=2, scale=0.3)), ("w2", rand(c, c, 3, 3, seed=3, scale=0.1)),
                  ("w4", rand(c, 2 * c + co, 1, 1, seed=5, scale=0.1))]
        return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, c, hw, hw])], inits)
    return make(nodes, [("x", [1, 3, hw, hw])], [("r", [1, co, ph, ph])], inits)


def dense_layer(c=8, hw=12, g=8):
    """x -> 3x3 conv; BatchNormalization + Relu of Concat(x', conv) -> 1x1 conv."""
    nodes = [conv("x", "a", "w0", 3), conv("a", "b", "w1", 3), helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "s", "t", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["nr"]), conv("nr", "y", "w2")]
    inits = [("w0", rand(c, 3, 3, 3, seed=1, scale=0.3)), ("w1", rand(g, c, 3, 3, seed=2, scale=0.2)),
             ("s", rand(c + g, seed=3, scale=0.5) + 1.0), ("t", rand(c + g, seed=4, scale=0.2)),
             ("m", rand(c + g, seed=5, scale=0.1)), ("v", abs(rand(c + g, seed=6, scale=0.5)) + 0.5),
             ("w2", rand(c, c + g, 1, 1, seed=7, scale=0.3))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, c, hw, hw])], inits)


def stitched_consumer(model, op="MaxPool"):
    """The consumer of the model's `op` kernel with that kernel stitched in (the rewrite alone,
    without grouping or the cost model), and its graph: for tests of the tile search."""
    from opt_models import program
    from swbuild.backends.sunway.passes.stitch_producers import _stitchable, _stitched
    p = program(model)
    prod = next(k for k in p.kernels if k.op == op)
    t = p.root(prod.buffers[prod.out].tensor)
    cons, bn = next((k, n) for k in p.kernels for n, b in k.buffers.items() if n != k.out and p.root(b.tensor) == t)
    act = _stitchable(p, prod, cons, bn)
    assert act is not None
    return _stitched(prod, cons, bn, act), p.graph
