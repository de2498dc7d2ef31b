"""`swbuild ops`: per node of a model, supported or why not, per target; without a model
the operator list of a target; an unsupported op names its nearest alternatives."""
import json
import re
from pathlib import Path

import onnx
from onnx import helper

from onnx_builders import make, rand
from swbuild import cli


def model(tmp_path, bad=True):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["s"], name="softmax", axis=1)]
    if bad:
        nodes += [helper.make_node("Celu", ["s"], ["e"], name="celu"),
                  helper.make_node("Pad", ["e", "p"], ["y"], name="pad", mode="reflect")]
    else:
        nodes += [helper.make_node("Pad", ["s", "p"], ["y"], name="pad", mode="constant")]
    m = make(nodes, [("x", [1, 4, 8, 8])], [("y", [1, 8, 10, 10])],
             [("w", rand(8, 4, 3, 3)), ("p", onnx.numpy_helper.to_array(
                 onnx.numpy_helper.from_array(__import__("numpy").array([0, 0, 1, 1, 0, 0, 1, 1], "int64"))))])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


def ops(capsys, *argv):
    code = cli.main(["ops", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_per_node_why_not(tmp_path, capsys):
    code, out, err = ops(capsys, model(tmp_path), "--target", "sunway-emu", "--json")
    assert code == 3 and "Traceback" not in err
    doc = json.loads(out)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert [r["node"] for r in doc["nodes"]] == ["conv", "relu", "softmax", "celu", "pad"]
    assert rows["celu"]["status"] == "unsupported"
    assert "operator Celu is not supported; nearest supported: Selu, Relu, Gelu" in rows["celu"]["detail"]
    assert rows["pad"]["status"] == "unsupported" and "mode 'reflect' is not supported" in rows["pad"]["detail"]
    # the nodes that lowered still went through the Sunway pipeline: real LDM numbers per kernel
    assert rows["conv"]["status"] == "supported" and "64 CPEs, LDM" in rows["conv"]["detail"]
    assert rows["relu"]["status"] == "fused"
    assert doc["counts"]["unsupported"] == 2 and doc["supported"] is False
    # the table says the same in words
    code, out, _ = ops(capsys, model(tmp_path), "--target", "sunway-emu")
    assert code == 3 and out.splitlines()[0].startswith("m on sunway-emu (sunway): 5 nodes: 2 supported, 1 fused, 2 unsupported")
    assert any(ln.split()[:3] == ["celu", "Celu", "unsupported"] for ln in out.splitlines())


def test_the_family_decides(tmp_path, capsys):
    path = model(tmp_path, bad=False)
    code, out, _ = ops(capsys, path, "--target", "diannao-emu", "--json")
    dn = {r["node"]: r for r in json.loads(out)["nodes"]}
    assert code == 0 and json.loads(out)["supported"]
    assert "conv, tensorized (" in dn["conv"]["detail"] and "__bang_conv" in dn["conv"]["detail"]
    assert "scalar device code, not tensorized" in dn["softmax"]["detail"]
    code, out, _ = ops(capsys, path, "--target", "sunway-emu", "--json")
    sw = {r["node"]: r for r in json.loads(out)["nodes"]}
    assert code == 0 and "CPEs" in sw["softmax"]["detail"] and "tensorized" not in sw["softmax"]["detail"]
    # a local memory the kernels cannot fit: the target refuses each kernel and says how much it needs
    code, out, _ = ops(capsys, path, "--target", "sunway-emu", "--json", "--set", "ldm_reserve=65500")
    doc = json.loads(out)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert code == 3 and doc["counts"]["unchecked"] == 0
    for node in ("conv", "softmax", "pad"):
        assert rows[node]["status"] == "unsupported", rows[node]
        assert re.search(r"needs at least \d+ bytes of local memory per core, budget is 36 bytes", rows[node]["detail"])


def test_grouping_on_still_reports_each_kernel(tmp_path, capsys):
    """With grouping on, a group's kernels run in one launch: each node still names its kernel
    and what the target made of it (they once all read "fused into a neighbouring kernel")."""
    path = model(tmp_path, bad=False)
    for target, word in (("sunway-emu", "64 CPEs, LDM"), ("diannao-emu", "tensorized")):
        rows = {}
        for mode in ("off", "on"):
            code, out, err = ops(capsys, path, "--target", target, "--json", "--set", f"grouping={mode}")
            assert code == 0, err
            rows[mode] = {r["node"]: (r["status"], r["detail"]) for r in json.loads(out)["nodes"]}
        assert rows["on"] == rows["off"], target
        assert rows["on"]["conv"][0] == "supported" and word in rows["on"]["conv"][1]


def test_operator_list_per_target(capsys):
    code, out, _ = ops(capsys, "--target", "diannao-emu")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("diannao-emu (diannao): ") and "__bang_conv" in lines[0]
    assert "Conv" in lines and "Softmax" in lines
    code, out2, _ = ops(capsys, "--target", "sunway-emu")
    assert out2.splitlines()[0].startswith("sunway-emu (sunway): ") and out2.splitlines()[2:] == lines[2:]
    assert ops(capsys)[1].splitlines() == lines[2:]


def test_model_needs_a_target(tmp_path, capsys):
    code, _, err = ops(capsys, model(tmp_path))
    assert code == 2 and "give --target" in err


def test_light_resnet50_node_by_node(capsys):
    """The ONNX package's light_resnet50: every node accounted for on Sunway."""
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    n_nodes = len(onnx.load(path, load_external_data=False).graph.node)
    code, out, _ = ops(capsys, path, "--target", "sunway-emu", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["supported"] and len(doc["nodes"]) == n_nodes
    convs = [r for r in doc["nodes"] if r["op"] == "Conv"]
    assert len(convs) == 53 and all(r["status"] == "supported" and "LDM" in r["detail"] for r in convs)
    assert doc["counts"]["unsupported"] == doc["counts"]["unchecked"] == 0
    assert sum(doc["counts"].values()) == n_nodes
