"""`swbuild report`: a table by default whose numbers are the JSON document's, the document
with --json, --plot refused up front without matplotlib, and DianNao's
own plot: cycles by kernel and instruction class (measured by the BANG emulator)."""
import json
import sys

import onnx
import pytest
from onnx import helper

from onnx_builders import make, rand
from swbuild import cli


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=1)]
    path = d / "small.onnx"
    onnx.save(make(nodes, [("x", [1, 4, 8, 8])], [("y", [1, 8, 8, 8])], [("w", rand(8, 4, 3, 3))]), path)
    return d, path


def report(capsys, *argv):
    code = cli.main(["report", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_plot_without_matplotlib_says_so_before_any_work(small, capsys, monkeypatch):
    d, path = small
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # as if the `plot` extra were not installed
    code, out, err = report(capsys, path, "--target", "diannao-emu", "-o", d / "never", "--plot", d / "x.png")
    assert code == 2 and "--plot needs matplotlib, the `plot` extra: pip install 'swbuild[plot]'" in err
    assert "Traceback" not in err and not (d / "never").exists() and not (d / "x.png").exists()


def _rows(table):
    """The table's kernel rows and its total row, split into columns."""
    lines = table.splitlines()
    rules = [i for i, ln in enumerate(lines) if set(ln) == {"-"}]
    return [ln.split() for ln in lines[rules[0] + 1:rules[1]]], lines[rules[1] + 1].split()


def test_diannao_table_json_and_plot(small, capsys):
    pytest.importorskip("matplotlib")   # in the `test` extra
    d, path = small
    png = d / "dn.png"
    # grouping off: one table row per kernel (a grouped launch's rows: test_grouping_emulated.py)
    code, out, err = report(capsys, path, "--target", "diannao-emu", "-o", d / "dn", "--plot", png, "--grouping", "off")
    assert code == 0, err
    # --json: the document, on one line (the emulator's cycles are deterministic)
    code, js, _ = report(capsys, path, "--target", "diannao-emu", "--runner", d / "dn" / "small_runner", "--json",
                         "--grouping", "off")
    rep = json.loads(js)
    assert code == 0 and js.count("\n") == 1
    rows, total = _rows(out)
    assert [r[0] for r in rows] == [k["name"].removeprefix("small_") for k in rep["kernels"]]
    assert [int(r[3]) for r in rows] == [k["cycles"] for k in rep["kernels"]]
    assert total[:3] == ["total", str(rep["kernel_launches"]), "kernels"] and int(total[3]) == rep["cycles"]
    # the emulator's cycles per instruction: summed per kernel and in total, the convolution among them
    assert rep["instruction_cycles"]["__bang_conv"] > 0
    assert sum(sum(k["instruction_cycles"].values()) for k in rep["kernels"]) == sum(rep["instruction_cycles"].values())
    conv = rep["kernels"][0]
    assert conv["class"] == "conv" and 0 < conv["roofline_fraction"] < 1 and conv["gdram_bytes"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plot written to" in err


def test_sunway_table_totals(small, capsys):
    d, path = small
    code, out, err = report(capsys, path, "--target", "sunway-emu", "-o", d / "sw", "--grouping", "off")
    assert code == 0, err
    code, js, _ = report(capsys, path, "--target", "sunway-emu", "--runner", d / "sw" / "small_runner", "--json",
                         "--grouping", "off")
    rep = json.loads(js)
    rows, total = _rows(out)
    assert len(rows) == rep["kernel_launches"] == len(rep["kernels"])
    assert sum(float(r[2]) for r in rows) == pytest.approx(rep["modeled_seconds"] * 1e3, abs=5e-3 * len(rows))
    # total, N, kernels, ms, DMA MB, x compulsory, roofline, LDM, DMA = plan
    assert float(total[3]) == pytest.approx(rep["modeled_seconds"] * 1e3, abs=1e-3)
    assert float(total[4]) == pytest.approx(rep["main_memory_bytes"] / 1e6, abs=0.01)
    assert float(total[5]) == pytest.approx(rep["traffic_ratio"], abs=0.01)
    assert float(total[6]) == pytest.approx(rep["roofline_fraction"], abs=0.01)
    assert int(total[7]) == rep["ldm_peak_bytes"] and total[-1] == "yes" and rep["dma_match"]
    assert out.splitlines()[0].startswith(f"small on sunway-emu: {rep['kernel_launches']} kernels")
