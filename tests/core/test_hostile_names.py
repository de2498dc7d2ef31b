"""Names from a model that are C/C++ keywords, standard macros or runtime symbols, and a model
named like the runtime: the generated code builds and runs on both families."""
import json

import pytest
from onnx import helper

from core_models import make
import shared_builds
from swbuild.driver import build, check
from swbuild.config import toolchain
from swbuild.driver.compiler import compile_to

NAMES = ["NULL", "asm", "typeof", "class", "new", "this", "template", "bool", "operator", "EOF", "assert",
         "athread_spawn", "athread_running_kernel", "i", "ws", "workspace"]


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_hostile_tensor_names_and_model_name_build_and_run(tmp_path, target):
    nodes = [helper.make_node("Add", [NAMES[k], NAMES[k + 1]], [f"s{k}"]) for k in range(0, len(NAMES), 2)]
    nodes += [helper.make_node("Sum", [f"s{k}" for k in range(0, len(NAMES), 2)], ["operator_out"])]
    m = make(nodes, [(n, [2, 3]) for n in NAMES], [("operator_out", [2, 3]), ("delete", [2, 3])])
    m.graph.node.append(helper.make_node("Relu", ["s0"], ["delete"]))
    tc = toolchain.load(target)
    prog, _ = compile_to(m, tc, tmp_path, "athread")
    assert prog.prefix != "athread"
    rt_lib = shared_builds.runtime_lib(tc, tmp_path / "rt")
    steps, _, exe = build.model_steps(tc, prog.prefix, tmp_path, tmp_path, rt_lib)
    build.run_steps(steps, log=lambda s: None)
    plan = json.loads((tmp_path / f"{prog.prefix}.plan.json").read_text())
    inputs = check.seeded_inputs(plan["inputs"], 0)
    doc = check.check_build(plan, exe, lambda ins: check.onnxruntime_reference(m, ins), inputs, 1e-5, 1e-6)
    assert doc["status"] == "pass", doc
