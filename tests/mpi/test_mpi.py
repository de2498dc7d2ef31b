"""Builds over MPI ranks (swbuild/driver/mpi.py): batch split, pipeline stages, generated entry points,
`swbuild check` under mpirun against onnxruntime, per-rank counters, the cost model.

These need OpenMPI (mpicc, mpirun) and do not skip without it: .ci/run and ci/Dockerfile
install it; elsewhere `apt-get install openmpi-bin libopenmpi-dev`."""
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from swbuild import cli
from swbuild.driver import mpi
from swbuild.config import toolchain
from swbuild.support.errors import SwbuildError
from swbuild.optimizer.stages import balance

ITEM_IN, ITEM_OUT = 3 * 6 * 6 * 4, 10 * 4      # bytes of one batch item of the tiny model


def _passed(code, doc):
    """The check passed; else its whole JSON (the reason, the runner's stderr) is printed, where
    pytest's shortened assertion message would cut it (a rare CI failure gave no reason)."""
    ok = code == 0 and doc.get("status") == "pass"
    if not ok:
        print(json.dumps(doc, indent=1, sort_keys=True))
    return ok


def tiny_model(path):
    rng = np.random.default_rng(1)
    w = nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    g = nh.from_array(rng.standard_normal((10, 4 * 6 * 6)).astype(np.float32), "g")
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Flatten", ["r"], ["f"]), h.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    graph = h.make_graph(nodes, "tiny", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], [w, g])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(path))
    return path


def deep_model(path):
    """Four kernels; the graph input x is read again by the third (it must cross two cuts)."""
    rng = np.random.default_rng(2)

    def init(n, s):
        return nh.from_array((0.3 * rng.standard_normal(s)).astype(np.float32), n)
    inits = [init("w1", (4, 3, 3, 3)), init("w2", (4, 4, 3, 3)), init("w3", (3, 4, 3, 3)), init("g", (10, 3 * 6 * 6))]
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["a"]),
             h.make_node("Conv", ["a", "w2"], ["b"], pads=[1, 1, 1, 1]), h.make_node("Add", ["a", "b"], ["c"]),
             h.make_node("Conv", ["c", "w3"], ["d"], pads=[1, 1, 1, 1]), h.make_node("Sigmoid", ["d"], ["s"]),
             h.make_node("Mul", ["s", "x"], ["e"]), h.make_node("Flatten", ["e"], ["f"]),
             h.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    graph = h.make_graph(nodes, "deep", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(path))
    return path


def test_balance_cuts_consecutive_ranges():
    assert balance([1, 1, 1, 1], 2) == [(0, 2), (2, 4)]
    assert balance([5, 1, 1, 1, 1, 1], 2) == [(0, 1), (1, 6)]
    assert balance([1, 2, 3, 4, 5], 3) == [(0, 3), (3, 4), (4, 5)]
    # A costly cut moves: sending before kernel 2 costs 10, before kernel 1 nothing.
    assert balance([1, 1, 1, 1], 2, lambda b: 10.0 if b == 2 else 0.0) == [(0, 1), (1, 4)]
    with pytest.raises(ValueError):
        balance([1, 1], 3)


def test_layout_splits_uneven_batches():
    lay = mpi.Layout(2, 1, 3)
    assert (lay.ranks, lay.rank_batch, lay.counts) == (2, 2, [2, 1])
    lay = mpi.Layout(4, 2, 10)
    assert (lay.ranks, lay.rank_batch, lay.counts) == (8, 2, [2, 2, 1, 1, 1, 1, 1, 1])
    assert mpi.Layout(4, 1, 3).counts == [1, 1, 1, 0]


def test_layout_refusals():
    tc = toolchain.load("sunway-emu")
    assert mpi.layout_of({"core_groups": 1}, 8, "m", tc) is None
    lay = mpi.layout_of({"core_groups": 4, "parallel": "pipeline"}, 8, "m", tc)
    assert (lay.rank_batch, lay.counts) == (1, [8, 8, 8, 8])
    with pytest.raises(SwbuildError, match="has 4 core groups; use nodes="):
        mpi.layout_of({"core_groups": 6}, 8, "m", tc)
    assert mpi.layout_of({"core_groups": 6}, 8, "m", toolchain.load("sunway-pro-emu")).ranks == 6
    with pytest.raises(SwbuildError, match="not built for the diannao family"):
        mpi.layout_of({"core_groups": 2}, 8, "m", toolchain.load("diannao-emu"))


def test_cost_model_counts_communication():
    hw = {"noc_bandwidth_bytes_per_s": 1e9, "noc_latency_s": 1e-6, "net_bandwidth_bytes_per_s": 1e8, "net_latency_s": 1e-5}
    lay = mpi.Layout(2, 2, 4)        # 4 ranks, one item each; ranks 2, 3 on the second node
    rank_plan = {"kernels": [{"modeled_seconds": 0.5}], "inputs": [{"shape": [1, 1000], "dtype": "float32"}],
                 "outputs": [{"shape": [1, 10], "dtype": "float32"}]}
    doc = mpi.model(hw, lay, rank_plan, {"kernels": [{"modeled_seconds": 2.0}]})
    scatter = (1e-6 + 4000 / 1e9) + 2 * (1e-5 + 4000 / 1e8)
    gather = (1e-6 + 40 / 1e9) + 2 * (1e-5 + 40 / 1e8)
    assert doc["scatter_seconds"] == pytest.approx(scatter)
    assert doc["gather_seconds"] == pytest.approx(gather)
    assert doc["speedup_over_one_core_group"] == pytest.approx(2.0 / (scatter + 0.5 + gather))
    assert [r["items"] for r in doc["ranks"]] == [1, 1, 1, 1]


@pytest.mark.parametrize("cgs,nodes,counts", [(2, 1, [2, 1]), pytest.param(4, 1, [1, 1, 1, 0], marks=pytest.mark.slow),
                                               (2, 2, [1, 1, 1, 0])])
def test_check_tiny_model_over_ranks(tmp_path, capsys, cgs, nodes, counts):
    model = tiny_model(tmp_path / "tiny.onnx")
    out = tmp_path / "build"
    ranks = cgs * nodes
    code = cli.main(["check", str(model), "--target", "sunway-emu", "--set", "batch=3", "--set",
                     f"core_groups={cgs}", "--set", f"nodes={nodes}", "-o", str(out)])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert _passed(code, doc)
    rows = doc["emulator"]["ranks"]
    assert [r["items"] for r in rows] == counts
    # Rank 0 sends every other rank its slice and receives its outputs; every rank ran the kernels.
    assert rows[0]["mpi_sent_bytes"] == (3 - counts[0]) * ITEM_IN
    assert rows[0]["mpi_recv_bytes"] == (3 - counts[0]) * ITEM_OUT
    for r in rows[1:]:
        assert (r["mpi_recv_bytes"], r["mpi_sent_bytes"]) == (r["items"] * ITEM_IN, r["items"] * ITEM_OUT)
        assert r["dma_get_bytes"] == rows[0]["dma_get_bytes"] > 0
    assert doc["emulator"]["sum"]["mpi_sent_bytes"] == doc["emulator"]["sum"]["mpi_recv_bytes"] == 3 * (ITEM_IN + ITEM_OUT) - counts[0] * (ITEM_IN + ITEM_OUT)
    plan = json.loads((out / "tiny.plan.json").read_text())
    assert plan["inputs"][0]["shape"] == [3, 3, 6, 6] and plan["mpi"]["counts"] == counts
    header = (out / "tiny.h").read_text()
    assert "#include <mpi.h>" in header and "int tiny_run_mpi(MPI_Comm comm," in header
    assert f"#define TINY_MPI_RANKS {ranks}" in header
    # Ranks on a second node are reached over the inter-node network, the others over the chip's.
    hw = toolchain.load("sunway-emu").hardware
    m = plan["mpi"]["model"]
    links = [(hw["noc_bandwidth_bytes_per_s"], hw["noc_latency_s"]) if r < cgs else
             (hw["net_bandwidth_bytes_per_s"], hw["net_latency_s"]) for r in range(1, ranks)]
    assert m["scatter_seconds"] == pytest.approx(sum(lat + n * ITEM_IN / bw for (bw, lat), n in zip(links, counts[1:])))


def test_single_core_group_build_is_unchanged(tmp_path):
    model = tiny_model(tmp_path / "tiny.onnx")
    for sets, out in (([], "a"), (["--set", "core_groups=1"], "b")):
        assert cli.main(["compile", str(model), "--target", "sunway-emu", "--set", "batch=3", *sets,
                         "-o", str(tmp_path / out)]) == 0
    for f in ("tiny.h", "tiny_host.c", "tiny_runner.c"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert "mpi" not in (tmp_path / "a" / "tiny.h").read_text()
    assert not (tmp_path / "a" / "tiny_mpi.c").exists()


def test_missing_batch_and_too_many_stages_are_refused(tmp_path, capsys):
    model = tiny_model(tmp_path / "tiny.onnx")
    code = cli.main(["compile", str(model), "--target", "sunway-emu", "--set", "core_groups=2", "-o", str(tmp_path / "y")])
    assert code != 0
    assert "give the batch" in capsys.readouterr().err
    code = cli.main(["compile", str(model), "--target", "sunway-emu", "--set", "batch=4", "--set", "core_groups=4",
                     "--set", "parallel=pipeline", "-o", str(tmp_path / "z")])
    assert code != 0
    assert "needs as many kernels; it has 2" in capsys.readouterr().err


def _check_pipelined(model, out, batch, ranks, capsys):
    """`swbuild check` of `model` pipelined over `ranks` ranks on sunway-emu, asserted to pass:
    its JSON document and its plan."""
    code = cli.main(["check", str(model), "--target", "sunway-emu", "--set", f"batch={batch}", "--set",
                     f"core_groups={ranks}", "--set", "parallel=pipeline", "-o", str(out)])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert _passed(code, doc)
    return doc, json.loads((out / f"{model.stem}.plan.json").read_text())


@pytest.mark.parametrize("ranks", [2, 4])
def test_pipeline_streams_items_through_stages(tmp_path, capsys, ranks):
    out = tmp_path / "build"
    doc, plan = _check_pipelined(deep_model(tmp_path / "deep.onnx"), out, 5, ranks, capsys)
    stages = plan["mpi"]["stages"]
    assert len(stages) == ranks and stages[0][0] == 0 and stages[-1][1] == len(plan["kernels"])
    assert all(a < b for a, b in stages) and all(stages[i][1] == stages[i + 1][0] for i in range(ranks - 1))
    rows = doc["emulator"]["ranks"]
    # Each rank spawned only its stage's kernels, once per item of the stream.
    assert all(r["items"] == 5 and r["dma_get_bytes"] > 0 for r in rows)
    # The last rank sends each item's 10 floats to rank 0; x (432 bytes) crosses every cut before its last reader.
    assert rows[-1]["mpi_sent_bytes"] == 5 * ITEM_OUT and rows[0]["mpi_recv_bytes"] == 5 * ITEM_OUT
    assert rows[0]["mpi_sent_bytes"] >= 5 * ITEM_IN
    m = plan["mpi"]["model"]
    assert m["one_core_group_seconds"] == pytest.approx(5 * sum(k["modeled_seconds"] for k in plan["kernels"]))
    assert "int deep_run_range(int sw_first, int sw_last," in (out / "deep.h").read_text()


def concat_model(path):
    """Two branches written in place into a Concat that a later convolution reads."""
    rng = np.random.default_rng(3)
    ws = [nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
          for n, s in (("w0", (6, 3, 3, 3)), ("w1", (6, 6, 1, 1)), ("w2", (6, 6, 3, 3)), ("w3", (4, 12, 1, 1)))]
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]), h.make_node("Conv", ["a", "w1"], ["p"]),
             h.make_node("Conv", ["a", "w2"], ["q"], pads=[1, 1, 1, 1]), h.make_node("Concat", ["p", "q"], ["cat"], axis=1),
             h.make_node("Conv", ["cat", "w3"], ["y"])]
    graph = h.make_graph(nodes, "cat", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], ws)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("ranks", [2, 3])
def test_pipeline_cut_inside_an_in_place_concat(tmp_path, capsys, ranks):
    """Cuts fall between the writers of a Concat's parts and its reader: the Concat's storage
    crosses them whole. (The liveness once looked at the parts alone; the cut lost them and
    the last stage read garbage.)"""
    out = tmp_path / "build"
    _, plan = _check_pipelined(concat_model(tmp_path / "cat.onnx"), out, 2, ranks, capsys)
    assert len(plan["kernels"]) == 4 and plan["mpi"]["stages"][-1][0] >= 2       # a part's writer before a cut
    assert "/* cat */" in (out / "cat_mpi.c").read_text()       # the Concat's storage crosses it


def test_report_has_ranks_and_plot(tmp_path, capsys):
    model = tiny_model(tmp_path / "tiny.onnx")
    png = tmp_path / "ranks.png"
    try:
        import matplotlib  # noqa: F401  (the optional `plot` extra)
        plot = ["--plot", str(png)]
    except ImportError:
        plot = []
    code = cli.main(["report", str(model), "--target", "sunway-emu", "--set", "batch=3", "--set", "core_groups=2",
                     "-o", str(tmp_path / "b"), "--json", *plot])
    rep = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert rep["mpi"]["counts"] == [2, 1] and len(rep["mpi"]["measured"]["ranks"]) == 2
    assert rep["mpi"]["model"]["speedup_over_one_core_group"] > 0
    if plot:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("target,ranks", [("sunway-emu", 4), ("sunway-pro-emu", 6)])
def test_resnet18_batch8_over_core_groups(tmp_path, capsys, target, ranks):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "resnet18.yaml"
    code = cli.main(["check", "--recipe", str(recipe), "--target", target, "--set", "batch=8", "--set",
                     f"core_groups={ranks}", "-o", str(tmp_path / "r18")])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert _passed(code, doc)
    plan = json.loads((tmp_path / "r18" / "resnet18.plan.json").read_text())
    if ranks == 4:
        assert plan["mpi"]["model"]["speedup_over_one_core_group"] >= 3.2


@pytest.mark.slow
def test_resnet18_pipeline_stream_of_8_over_4_ranks(tmp_path, capsys):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "resnet18.yaml"
    code = cli.main(["check", "--recipe", str(recipe), "--target", "sunway-emu", "--set", "batch=8", "--set",
                     "core_groups=4", "--set", "parallel=pipeline", "-o", str(tmp_path / "r18")])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert _passed(code, doc)
    assert [r["items"] for r in doc["emulator"]["ranks"]] == [8, 8, 8, 8]


def test_scons_variables_build_and_check_over_ranks(tmp_path):
    import hashlib
    import os
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "models").mkdir()
    sha = hashlib.sha256(tiny_model(tmp_path / "models" / "tiny.onnx").read_bytes()).hexdigest()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.yaml").write_text(f"model: tiny\nsource:\n  onnx: ../models/tiny.onnx\n  sha256: {sha}\n"
                                                    "batch: 3\ntargets: [sunway-emu]\n")
    shutil.copy(repo / "SConstruct", tmp_path / "SConstruct")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWBUILD_")}
    p = subprocess.run([sys.executable, "-m", "SCons", "-Q", "target=sunway-emu", "model=tiny", "core_groups=2", "check"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    assert doc["status"] == "pass" and [r["items"] for r in doc["emulator"]["ranks"]] == [2, 1]
    assert (tmp_path / "build" / "sunway-emu" / "tiny-coregroups2" / "tiny_mpi.c").is_file()   # its own directory


def test_real_target_sources_and_job_script(tmp_path):
    """target=sunway generates the same MPI sources, and a job script queued as the toolchain says."""
    model = deep_model(tmp_path / "deep.onnx")
    assert cli.main(["compile", str(model), "--target", "sunway", "--set", "batch=8", "--set", "core_groups=4",
                     "-o", str(tmp_path / "real")]) == 0
    job = (tmp_path / "real" / "deep_job.sh").read_text()
    assert 'exec bsub -I -b -q q_sw_expr -n 4 -cgsp 64' in job and '/deep_runner" "$@"' in job
    assert "MPI_Scatterv" in (tmp_path / "real" / "deep_mpi.c").read_text()
    lock = json.loads((tmp_path / "real" / "deep.lock.json").read_text())
    assert "deep_job.sh" in json.dumps(lock) and "deep_mpi.c" in json.dumps(lock)


PER_RANK_IO = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "tiny.h"
/* Per-rank I/O: every rank reads its own items of IN and writes its outputs into OUT. */
int main(int argc, char **argv)
{
    int rank, first, items;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (tiny_mpi_slice(rank, &first, &items) != 0 || tiny_init() != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    size_t in_item = TINY_INPUT0_ELEMS / TINY_RANK_BATCH, out_item = TINY_OUTPUT0_ELEMS / TINY_RANK_BATCH;
    float *in = calloc(TINY_INPUT0_ELEMS, sizeof(float)), *out = calloc(TINY_OUTPUT0_ELEMS, sizeof(float));
    void *ws = aligned_alloc(64, ((TINY_WORKSPACE_SIZE + 63) / 64) * 64 + 64);
    FILE *f = fopen(argv[1], "rb");
    fseek(f, (long)(first * in_item * sizeof(float)), SEEK_SET);
    if (fread(in, sizeof(float), items * in_item, f) != items * in_item) MPI_Abort(MPI_COMM_WORLD, 2);
    fclose(f);
    if (tiny_run(in, out, ws) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
    tiny_teardown();
    MPI_Barrier(MPI_COMM_WORLD);   /* rank 0 created OUT before anyone writes into it */
    f = fopen(argv[2], "r+b");
    fseek(f, (long)(first * out_item * sizeof(float)), SEEK_SET);
    fwrite(out, sizeof(float), items * out_item, f);
    fclose(f);
    MPI_Finalize();
    return 0;
}
"""


def test_per_rank_io_with_mpi_slice(tmp_path, capsys):
    import os
    import subprocess
    from swbuild.driver.check import onnxruntime_reference
    model = tiny_model(tmp_path / "tiny.onnx")
    out = tmp_path / "b"
    assert cli.main(["compile", str(model), "--target", "sunway-emu", "--set", "batch=5", "--set", "core_groups=3",
                     "--exe", "-o", str(out)]) == 0
    (tmp_path / "main.c").write_text(PER_RANK_IO)
    exe = tmp_path / "per_rank"
    subprocess.run(["mpicc", "-std=gnu11", "-I", str(out), str(tmp_path / "main.c"), str(out / "libtiny.a"),
                    str(out / "_runtime" / "libswemu.a"), "-lpthread", "-lm", "-o", str(exe)], check=True)
    x = np.random.default_rng(3).standard_normal((5, 3, 6, 6)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    (tmp_path / "y.bin").write_bytes(bytes(5 * ITEM_OUT))
    launch = mpi.launch_argv({"mpi": {"ranks": 3}})
    p = subprocess.run(launch + [str(exe), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")], capture_output=True,
                       text=True, env={k: v for k, v in os.environ.items() if k != "SWEMU_STATS"}, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    got = np.fromfile(tmp_path / "y.bin", dtype=np.float32).reshape(5, 10)
    ref = onnxruntime_reference(str(model), {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
