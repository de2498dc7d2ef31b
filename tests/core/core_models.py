"""Small ONNX models written by the tests (never committed as files)."""
import json

from onnx import helper

from onnx_builders import as_array, bind_params, make, rand  # noqa: F401  (make, rand: re-exported to the tests here)
import shared_builds
from swbuild.driver import build, check
from swbuild.config import toolchain
from swbuild.driver.compiler import compile_to


def build_runner(m, target, tmp_path, name):
    """Compile `m` for `target` into tmp_path and build its runner with the emulation
    runtime; returns (plan, runner path)."""
    tc = toolchain.load(target)
    prog, _ = compile_to(m, tc, tmp_path, name)
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "rt")
    steps, _, exe = build.model_steps(tc, prog.prefix, tmp_path, tmp_path, rt_lib)
    build.run_steps(steps, log=lambda s: None)
    return json.loads((tmp_path / f"{prog.prefix}.plan.json").read_text()), exe


def build_and_run(m, target, tmp_path, ins, name):
    """Build `m`'s runner (build_runner) and run it on `ins`; returns (plan, outputs). The
    runner must exit 0."""
    plan, exe = build_runner(m, target, tmp_path, name)
    got, _, err, code, _ = check.run_runner(exe, plan, ins, tmp_path)
    assert code == 0, err
    return plan, got


def cnn(input_name="gpu_0/data_0", hw=12):
    """Conv(groups, pads) + Relu + MaxPool + LRN + AveragePool + Gemm + Softmax, hostile node names."""
    nodes = [
        helper.make_node("Conv", [input_name, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name='conv*/ "evil" \n#define x'),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=2, strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("MaxPool", ["c2"], ["p"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("LRN", ["p"], ["l"], size=3, alpha=1e-3),
        helper.make_node("AveragePool", ["l"], ["a"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("Flatten", ["a"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["prob/0"]),
    ]
    h2 = (hw + 1 - 3) // 2 + 1          # conv2: stride 2, one row/col of end padding
    a_hw = (h2 + 1 - 2) // 2 + 1        # avgpool 2x2 stride 2, end padding 1
    inits = [("w1", rand(8, 3, 3, 3, seed=1, scale=0.3)), ("b1", rand(8, seed=2)),
             ("w2", rand(8, 4, 3, 3, seed=3, scale=0.3)), ("b2", rand(8, seed=4)),
             ("fw", rand(10, 8 * a_hw * a_hw, seed=5, scale=0.1)), ("fb", rand(10, seed=6))]
    return make(nodes, [(input_name, [1, 3, hw, hw])], [("prob/0", [1, 10])], inits)


def node_tests(select, params):
    """The onnx package's backend node tests whose op types `select(set)` accepts, as
    (name, model, feed, expected outputs); inputs listed in `params` ({op: input positions})
    are bound as initializers (weights, scales and zero points that the compiler needs
    constant), the rest stay graph inputs fed from the test's data."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.kind == "node" and c.data_sets and select(c)]
    out = []
    for c in sorted(cases, key=lambda c: c.name):
        ins, outs = c.data_sets[0]
        m, feed = bind_params(c.model, ins, params)
        out.append((c.name, m, feed, [as_array(o) for o in outs]))
    return out
