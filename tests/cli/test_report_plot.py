"""`swbuild report` of a grouped model: the table counts kernels, not the launches that
hold them ("6 kernels in 1 launch", never "1 kernels"), and the plot's bar labels are the
table's kernel names (k3_conv, with its `k`) at a legible size."""
import json

import onnx
import pytest
from onnx import helper

from onnx_builders import make, rand
from swbuild import cli
from swbuild.backends.grouping_report import LABEL_POINTS


def chain(c=8, hw=16):
    def conv(x, y, w, k):
        return helper.make_node("Conv", [x, w], [y], pads=[k // 2] * 4)
    nodes = [conv("x", "a0", "wa", 1), helper.make_node("Relu", ["a0"], ["a"]), conv("a", "b0", "wb", 3),
             helper.make_node("Relu", ["b0"], ["b"]), conv("b", "c", "wc", 3), conv("c", "y", "wy", 1)]
    inits = [("wa", rand(c, 3, 1, 1, seed=1, scale=0.5)), ("wb", rand(c, c, 3, 3, seed=2, scale=0.2)),
             ("wc", rand(c, c, 3, 3, seed=3, scale=0.2)), ("wy", rand(c, c, 1, 1, seed=4, scale=0.3))]
    return make(nodes, [("x", [1, 3, hw, hw])], [("y", [1, c, hw, hw])], inits)


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    d = tmp_path_factory.mktemp("plot")
    onnx.save(chain(), d / "chain.onnx")
    return d


def _figures(monkeypatch):
    """Every figure the plot saves, looked at just before it is written."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    seen, save = [], Figure.savefig

    def savefig(fig, *a, **k):
        fig.canvas.draw()
        seen.append([(t.get_text(), t.get_fontsize()) for ax in fig.axes for t in ax.get_xticklabels()
                     if t.get_text()])
        return save(fig, *a, **k)
    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


@pytest.mark.parametrize("target", ["sunway-emu", "diannao-emu"])
def test_grouped_table_counts_kernels_and_plot_labels_are_legible(grouped, target, capsys, monkeypatch):
    pytest.importorskip("matplotlib")   # in the `test` extra
    d = grouped
    seen = _figures(monkeypatch)
    png = d / f"{target}.png"
    code = cli.main(["report", str(d / "chain.onnx"), "--target", target, "-o", str(d / target), "--grouping", "on",
                     "--plot", str(png), "-Q"])
    out = capsys.readouterr()
    assert code == 0, out.err
    code = cli.main(["report", str(d / "chain.onnx"), "--target", target, "--runner", str(d / target / "chain_runner"),
                     "--grouping", "on", "--json"])
    rep = json.loads(capsys.readouterr().out)
    kernels = [sub["name"] for k in rep["kernels"] for sub in k.get("kernels", [k])]
    assert len(kernels) == 4 and rep["kernel_launches"] < 4        # grouping put kernels in one launch
    launches = rep["kernel_launches"]
    head = out.out.splitlines()[0]
    assert head.startswith(f"chain on {target}: 4 kernels in {launches} launch{'es' if launches > 1 else ''}, "), head
    total = next(ln for ln in out.out.splitlines() if ln.startswith("total "))
    assert total.split()[:3] == ["total", "4", "kernels"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = seen[-1]
    bars = [k.removeprefix("chain_") for k in kernels] if target == "sunway-emu" else \
        [k["name"].removeprefix("chain_") for k in rep["kernels"]]
    assert [t for t, _ in labels if not t.startswith("$")][-len(bars):] == bars
    assert all(t.startswith("k") or t.startswith("g") for t in bars)
    assert all(size >= LABEL_POINTS >= 8 for t, size in labels if t in bars)
