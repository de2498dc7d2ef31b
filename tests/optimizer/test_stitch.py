"""Buffer stitching by recomputation (backends/sunway/passes/stitch_producers.py, option `stitch`):
a pooling or element-wise producer read by one kernel of its group is recomputed in that
kernel's LDM from a box of its input.

Under the emulator the stitched builds match onnxruntime with every launch's DMA predicted
exactly, no race or conflict and LDM within budget, and the producer's kernel is gone; the
rules refuse what the composition cannot express or what would not pay; the cost model's
refusals agree with the predictor."""
import onnx
import pytest
from onnx import helper

from opt_models import checked_plan
from stitch_models import dense_layer, pool_branch
from swbuild.backends.grouping_report import grouping_summary
from swbuild.backends.sunway.passes import stitch_producers
from swbuild.backends.sunway.cost.predict import predict_program
from swbuild.driver.compiler import build_program
from swbuild.config.toolchain import load

CASES = {"maxpool": lambda: pool_branch(c=16, hw=8, kind="MaxPool"),
         # count_include_pad=0: border divisors; 8 channels: at 16 the pool and its unstitched 1x1
         # consumer (2-D shared on SW26010-Pro) model faster than the stitched consumer there
         "averagepool": lambda: pool_branch(c=8, hw=8, kind="AveragePool"),
         "batchnorm": lambda: dense_layer()}                                   # per-channel constants in the stage


def _ran(plan):
    return [n for k in plan["kernels"] for n in (k["fused"] if k["op"] == "Group" else [k["name"]])]


@pytest.mark.parametrize("target", ["sunway-emu", "sunway-pro-emu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_stitched_producer_matches_and_predicts_exactly(case, target, tmp_path):
    f = tmp_path / f"{case}.onnx"
    onnx.save(CASES[case](), f)
    plan = checked_plan(f, tmp_path / "out", target)
    (st,) = plan["grouping"]["stitched"]
    assert st["producer"] not in _ran(plan) and st["consumer"] in _ran(plan)
    slave = next((tmp_path / "out").glob("*_slave.c")).read_text()
    assert "recomputed in LDM from box" in slave and st["producer"] in slave
    # the report maps the producer to the launch that ran it: its consumer's
    summary = grouping_summary(plan, "")
    group = next(g for g in summary["groups"] if st["producer"] in g["kernels"])
    launch = next(k["name"] for k in plan["kernels"] if st["consumer"] in _ran({"kernels": [k]}))
    assert launch in group["launches"] and st["producer"] not in group["launches"]


def test_stitch_off_and_grouping_off_keep_the_producer(tmp_path):
    f = tmp_path / "m.onnx"
    onnx.save(CASES["maxpool"](), f)
    for args in (("--set", "stitch=off"), ("--grouping", "off")):
        out = tmp_path / args[1].replace("=", "_")
        plan = checked_plan(f, out, "sunway-emu", *args)
        assert not (plan.get("grouping") or {}).get("stitched")
        assert any(n.endswith("maxpool") for n in _ran(plan))
        assert "recomputed in LDM" not in next(out.glob("*_slave.c")).read_text()


def _stitched(model, target="sunway-emu", **options):
    p = build_program(model, load(target), "t", options=options)
    return p, p.grouping.stitched if p.grouping else ()


def _accept_all(monkeypatch):
    monkeypatch.setattr(stitch_producers._Seconds, "__call__", lambda self, k: 0.0 if k.stages else 1.0)


def test_what_the_rules_refuse(monkeypatch):
    """With the cost model accepting everything, only the rules decide."""
    _accept_all(monkeypatch)
    p, st = _stitched(pool_branch(c=8, hw=8))           # the stitched case itself, for contrast
    assert len(st) == 1 and not any(k.name == st[0][0] for k in p.kernels)
    (cons,) = [k for k in p.kernels if k.stages]
    assert cons.name == st[0][1] and cons.stages[0].producer.op == "MaxPool"
    assert [b for b in cons.buffers.values() if b.tensor == "a"]       # it reads the pool's input
    # a down-sampling pool: its box would be four times the consumer's
    assert _stitched(pool_branch(c=8, hw=8, stride=2))[1] == ()
    # two readers of the pooled tensor
    m = pool_branch(c=8, hw=8)
    m.graph.node.append(helper.make_node("Relu", ["pl"], ["pl2"]))
    m.graph.output.append(helper.make_tensor_value_info("pl2", onnx.TensorProto.FLOAT, [1, 8, 8, 8]))
    assert _stitched(m)[1] == ()
    # the pooled tensor is a graph output
    m = pool_branch(c=8, hw=8)
    m.graph.output.append(helper.make_tensor_value_info("pl", onnx.TensorProto.FLOAT, [1, 8, 8, 8]))
    assert _stitched(m)[1] == ()
    # grouping off, or stitch off
    assert _stitched(pool_branch(c=8, hw=8), grouping="off")[1] == ()
    assert _stitched(pool_branch(c=8, hw=8), stitch="off")[1] == ()


def test_the_cost_models_refusal_agrees_with_the_predictor(monkeypatch):
    """An Inception-sized pool branch: the consumer would recompute the window for every
    broadcast box on every CPE of a row; the search's model refuses it, and forcing it makes
    the predictor's modelled time of the pair worse too."""
    model = pool_branch(c=64, hw=28, co=64)
    tc = load("sunway-emu")
    p, st = _stitched(model)
    assert st == ()
    _accept_all(monkeypatch)
    q, st = _stitched(model)
    assert len(st) == 1
    prod, cons = st[0][:2]
    before = {e["name"]: e["modeled_seconds"] for e in predict_program(p, tc)}
    after = {e["name"]: e["modeled_seconds"] for e in predict_program(q, tc)}
    assert after[cons] > before[prod] + before[cons]


def test_a_stitched_consumer_that_fits_no_tiling_is_not_stitched(monkeypatch):
    """The stage's buffer counts against LDM: where no tiling of the stitched consumer fits,
    the pair stays as it was (and the build does not fail)."""
    from swbuild.support.errors import LdmError
    real = stitch_producers.search_tiles

    def tiles(s):
        if s.k.stages:
            raise LdmError(s.k.name, 1 << 20, s.budget)
        return real(s)
    monkeypatch.setattr(stitch_producers, "search_tiles", tiles)
    p, st = _stitched(pool_branch(c=8, hw=8))
    assert st == () and any(k.op == "MaxPool" for k in p.kernels)
