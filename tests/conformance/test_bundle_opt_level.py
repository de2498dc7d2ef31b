"""The node-test bundle is compiled at -O0 (node_bundle.BUNDLE_OPT: a third of -O2's compile
time). That is sound only while the program computes what the toolchain's -O2 build computes:
the cases whose kernels call libm, divide, or accumulate (where contraction, constant folding
or reassociation would show) are built at both levels and must give the same output bytes and
the same emulator counters (the run's bundle against the same sources rebuilt at -O2)."""
import numpy as np

import node_bundle
from swbuild.config import toolchain

OPS = ["Erf", "Exp", "Log", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Pow", "Sqrt", "Cos", "Sin", "Atan",
       "Gelu", "LayerNormalization", "Conv", "Gemm", "ReduceLogSumExp", "Softplus", "Mish", "Elu", "Selu",
       "Reciprocal", "LSTM", "GRU", "BatchNormalization", "InstanceNormalization", "LRN"]


def _counters(stats):
    return [(k["write_conflicts"], k["spawns"], k["dma"]) for k in stats["kernels"]]


def test_bundle_at_O0_computes_what_O2_computes(node_suite, tmp_path):
    cases, exe, d = node_suite          # the run's bundle, at BUNDLE_OPT
    tc = toolchain.load("sunway-emu")
    assert node_bundle.BUNDLE_OPT == "-O0" and "-O2" in tc.flags["host"] and "-O2" in tc.flags["slave"]
    ok = [c for c in cases.values()
          if c.status == "compiled" and all(n.op_type in OPS for n in c.model.graph.node)]
    assert len(ok) >= 100, len(ok)
    # the same generated sources, again at the toolchain's -O2 (its own name in the bundle's directory)
    exes = {"-O0": exe, "-O2": node_bundle.build_bundle(ok, tc, d, opt="-O2", name="bundle-O2")}
    for c in ok:
        runs = {}
        for opt, exe in exes.items():
            w = tmp_path / f"run{opt}"
            w.mkdir(exist_ok=True)
            got, stats, err = node_bundle.run_case(c, exe, w)
            assert got is not None, (c.name, opt, err)
            runs[opt] = [g.tobytes() for g in got], _counters(stats)
        assert runs["-O0"] == runs["-O2"], c.name
        assert len(runs["-O0"][0]) == len(c.outputs) and all(np.asarray(o).size for o in c.outputs), c.name
