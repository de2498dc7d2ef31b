"""The node-test bundle is compiled at -O0 (node_bundle.BUNDLE_OPT: a third of -O2's compile
time). That is sound only while the program computes what the toolchain's -O2 build computes:
the cases whose kernels call libm, divide, or accumulate (where contraction, constant folding
or reassociation would show) are built at both levels and must give the same output bytes and
the same emulator counters."""
import numpy as np

import node_bundle
from swbuild.config import toolchain

OPS = ["Erf", "Exp", "Log", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Pow", "Sqrt", "Cos", "Sin", "Atan",
       "Gelu", "LayerNormalization", "Conv", "Gemm", "ReduceLogSumExp", "Softplus", "Mish", "Elu", "Selu",
       "Reciprocal", "LSTM", "GRU", "BatchNormalization", "InstanceNormalization", "LRN"]


def _counters(stats):
    return [(k["write_conflicts"], k["spawns"], k["dma"]) for k in stats["kernels"]]


def test_bundle_at_O0_computes_what_O2_computes(tmp_path):
    tc = toolchain.load("sunway-emu")
    assert node_bundle.BUNDLE_OPT == "-O0" and "-O2" in tc.flags["host"] and "-O2" in tc.flags["slave"]
    cases = [node_bundle.bind_params(c, i) for i, c in enumerate(node_bundle.collect(OPS))]
    for c in cases:
        node_bundle.compile_case(c, tc, tmp_path)
    ok = [c for c in cases if c.status == "compiled"]
    assert len(ok) >= 100, len(ok)
    exes = {opt: node_bundle.build_bundle(ok, tc, tmp_path, opt=opt, name=f"bundle{opt}") for opt in ("-O2", "-O0")}
    for c in ok:
        runs = {}
        for opt, exe in exes.items():
            d = tmp_path / f"run{opt}"
            d.mkdir(exist_ok=True)
            got, stats, err = node_bundle.run_case(c, exe, d)
            assert got is not None, (c.name, opt, err)
            runs[opt] = [g.tobytes() for g in got], _counters(stats)
        assert runs["-O0"] == runs["-O2"], c.name
        assert len(runs["-O0"][0]) == len(c.outputs) and all(np.asarray(o).size for o in c.outputs), c.name
