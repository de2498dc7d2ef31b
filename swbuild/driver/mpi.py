"""Beyond one core group: a model run data-parallel over MPI ranks, one rank per core group.

`core_groups: N` and `nodes: M` ask for N×M ranks. The batch B is split over them as evenly as
it goes (the first B mod R ranks take one more item); the model is compiled once for the
largest slice m = ceil(B/R) (a rank may get none when B < R), so every rank runs the same host/slave code on its own core
group's memory, and a rank with a shorter slice runs zero-filled items whose outputs are
dropped. `<model>_run_mpi` scatters the inputs from rank 0 and gathers the outputs back with
MPI_Scatterv/MPI_Gatherv. The weights are linked into every rank's binary and set up once
by `<model>_init`, as the single-core-group build does.

`parallel: pipeline` instead streams the batch one item at a time through consecutive kernel
stages, one per rank, cut where the cost model balances them (optimizer/stages.py; the C is
backends/sunway/mpi/pipeline.py). docs/mpi.md says what each number of the model means.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..support.errors import SwbuildError, ToolchainError


@dataclass(frozen=True)
class Layout:
    """How a batch is spread over ranks."""
    core_groups: int          # ranks per node (one per core group)
    nodes: int
    batch: int                # B, the batch the user gives rank 0 (pipeline: the stream's length)
    parallel: str = "data"
    stages: tuple = ()        # pipeline: (first, last) kernel range of each rank

    @property
    def ranks(self):
        return self.core_groups * self.nodes

    @property
    def rank_batch(self):
        """m = ceil(B/R): the batch each rank's code is compiled for (pipeline: one item)."""
        return 1 if self.parallel == "pipeline" else -(-self.batch // self.ranks)

    @property
    def counts(self):
        """Items per rank: B split as evenly as it goes, the first B mod R ranks one more
        (pipeline: every item passes every rank)."""
        if self.parallel == "pipeline":
            return [self.batch] * self.ranks
        q, r = divmod(self.batch, self.ranks)
        return [q + (1 if i < r else 0) for i in range(self.ranks)]

    def doc(self):
        return {"core_groups": self.core_groups, "nodes": self.nodes, "ranks": self.ranks, "parallel": self.parallel,
                "batch": self.batch, "rank_batch": self.rank_batch, "counts": self.counts,
                **({"stages": [list(x) for x in self.stages]} if self.stages else {})}


def layout_of(options, batch, model_name, tc=None):
    """The Layout the options ask for, or None for one core group. Refuses what is not built."""
    cgs, nodes = int(options.get("core_groups", 1)), int(options.get("nodes", 1))
    parallel = str(options.get("parallel", "data"))
    if cgs * nodes == 1:
        return None
    if tc is not None:
        from ..backends import family_of
        if family_of(tc).mpi_render is None:
            raise SwbuildError(f"target {tc.name}: core_groups/nodes > 1 is not built for the {tc.family} family")
        per_chip = int(tc.hardware.get("core_groups_per_chip", 0))
        if per_chip and cgs > per_chip:
            raise SwbuildError(f"target {tc.name}: core_groups={cgs} but a {tc.hardware.get('chip', 'chip')} node "
                               f"has {per_chip} core groups; use nodes= for more ranks")
    if not batch:
        raise SwbuildError(f"model {model_name}: core_groups x nodes = {cgs * nodes} ranks split the batch; "
                           "give the batch (recipe `batch:` or --set batch=N)")
    return Layout(cgs, nodes, int(batch), parallel)


def rank_shapes(shapes, lay):
    """Input shapes of one rank's program: the batch dimension becomes m."""
    return {k: (lay.rank_batch,) + tuple(v[1:]) for k, v in (shapes or {}).items()}


def global_plan(plan, lay, model_doc):
    """The plan of an MPI build: whole-batch I/O shapes (what check feeds), the layout, the model."""
    plan = dict(plan)
    for key in ("inputs", "outputs"):
        plan[key] = [dict(s, shape=[lay.batch] + list(s["shape"][1:])) for s in plan[key]]
    plan["mpi"] = dict(lay.doc(), model=model_doc)
    return plan


# -- building and running ------------------------------------------------------------------

def mpi_tools(tc):
    """argv prefixes of the MPI compiler and linker wrappers the toolchain names; refuses clearly."""
    for tool in ("mpi_cc", "mpi_link"):
        if tool not in tc.compilers:
            raise ToolchainError(f"target {tc.name}: the toolchain file names no {tool} (the MPI compiler wrapper) "
                                 "that core_groups/nodes > 1 need")
    cc = tc.argv("mpi_cc")
    if tc.emulated and not shutil.which(cc[0]):
        raise ToolchainError(f"target {tc.name}: {cc[0]} not found: install OpenMPI "
                             "(apt-get install openmpi-bin libopenmpi-dev)")
    return cc, tc.argv("mpi_link")


def launch_argv(plan):
    """mpirun for the plan's ranks; --allow-run-as-root only when we are root."""
    if not shutil.which("mpirun"):
        raise SwbuildError("mpirun not found: install OpenMPI (apt-get install openmpi-bin libopenmpi-dev)")
    argv = ["mpirun", "-n", str(plan["mpi"]["ranks"]), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv


def rank_stats(stats_path, ranks):
    """Per rank: (emulator statistics or None, MPI counters or None)."""
    out = []
    for r in range(ranks):
        em, mp = Path(f"{stats_path}.rank{r}"), Path(f"{stats_path}.rank{r}.mpi")
        out.append((json.loads(em.read_text()) if em.exists() else None,
                    json.loads(mp.read_text()) if mp.exists() else None))
    return out


def findings(fam, plan, per_rank):
    """The family's findings for every rank, then merged: any rank's problem is the build's."""
    merged = {"dma_mismatches": [], "write_conflicts": 0, "ldm_peak_bytes": 0, "ldm_over_budget": []}
    ranks, tot = [], {"dma_get_bytes": 0, "dma_put_bytes": 0, "mpi_sent_bytes": 0, "mpi_recv_bytes": 0, "mpi_messages": 0}
    for r, (st, mp) in enumerate(per_rank):
        # A pipeline rank ran its stage's kernels only, once per item.
        a, b = plan["mpi"]["stages"][r] if plan["mpi"].get("stages") else (0, len(plan["kernels"]))
        f = fam.findings(dict(plan, kernels=plan["kernels"][a:b]), st)
        if f.get("stats") == "missing" or mp is None:
            merged["stats"] = "missing"
            ranks.append({"rank": r, "stats": "missing"})
            continue
        merged["dma_mismatches"] += [dict(x, rank=r) for x in f.get("dma_mismatches", [])]
        merged["ldm_over_budget"] += [dict(x, rank=r) for x in f.get("ldm_over_budget", [])]
        merged["write_conflicts"] += int(f.get("write_conflicts", 0))
        merged["ldm_peak_bytes"] = max(merged["ldm_peak_bytes"], int(f.get("ldm_peak_bytes", 0)))
        get = sum(k["dma"]["get"]["bytes"] for k in st.get("kernels", []))
        put = sum(k["dma"]["put"]["bytes"] for k in st.get("kernels", []))
        row = {"rank": r, "items": plan["mpi"]["counts"][r], "dma_get_bytes": get, "dma_put_bytes": put,
               "mpi_sent_bytes": mp["sent_bytes"], "mpi_recv_bytes": mp["recv_bytes"], "mpi_messages": mp["messages"],
               "seconds": mp["seconds"], "write_conflicts": int(f.get("write_conflicts", 0))}
        ranks.append(row)
        for k in tot:
            tot[k] += row[k]
    merged["ranks"], merged["sum"] = ranks, tot
    return merged


# -- the cost model ------------------------------------------------------------------------

def _link(hw, lay, r, peer=0):
    """(bandwidth, latency) between ranks r and peer: the chip's network between core groups
    when both sit on one node, the inter-node network otherwise."""
    if r // lay.core_groups == peer // lay.core_groups:
        return float(hw["noc_bandwidth_bytes_per_s"]), float(hw["noc_latency_s"])
    return float(hw["net_bandwidth_bytes_per_s"]), float(hw["net_latency_s"])


def model(hw, lay, rank_plan, one_plan):
    """Modelled times of a data-parallel run, from the compiler's own kernel models.

    compute = sum of the kernels' modelled seconds of the rank program (batch m; every rank runs
    m items, padded). one_cg = the same sum for the whole batch compiled for one core group.
    Communication: rank 0 sends each other rank its slice one after the other (a linear
    Scatterv, latency + bytes/bandwidth each) and receives the outputs the same way; so the
    last rank starts computing after all sends. modelled seconds = scatter + compute + gather."""
    compute = sum(float(k["modeled_seconds"]) for k in rank_plan["kernels"])
    one = sum(float(k["modeled_seconds"]) for k in one_plan["kernels"])
    item_in = sum(_bytes(s) // lay.rank_batch for s in rank_plan["inputs"])
    item_out = sum(_bytes(s) // lay.rank_batch for s in rank_plan["outputs"])
    ranks, scatter = [], 0.0
    for r, n in enumerate(lay.counts):
        if r:
            bw, lat = _link(hw, lay, r)
            scatter += lat + n * item_in / bw
        ranks.append({"rank": r, "items": n, "start_seconds": scatter if r else 0.0, "compute_seconds": compute})
    gather = 0.0
    for r, n in enumerate(lay.counts[1:], 1):
        bw, lat = _link(hw, lay, r)
        gather += lat + n * item_out / bw
    # The last rank starts after every send; the gather waits for it.
    t = scatter + compute + gather
    for row in ranks:
        row["end_seconds"] = row["start_seconds"] + compute
    return {"one_core_group_seconds": one, "rank_compute_seconds": compute, "scatter_seconds": scatter,
            "gather_seconds": gather, "communication_seconds": scatter + gather, "modeled_seconds": t,
            "speedup_over_one_core_group": one / t if t > 0 else None, "ranks": ranks,
            "how": "one_core_group = sum of kernel modelled seconds at the whole batch on one CG; modeled = "
                   "linear scatter + rank compute (batch m) + linear gather over the toolchain's network numbers"}


def pipeline_model(hw, lay, times, sends):
    """Modelled times of a pipelined stream of B items. Stage s takes t_s (its kernels' modelled
    seconds at batch 1) plus c_s (latency + bytes / bandwidth of what it sends on: the live
    tensors to rank s+1, the outputs to rank 0 for the last). An item leaves after sum(t+c);
    the stream then advances by the slowest stage: modeled = sum(t+c) + (B-1) max(t+c).
    one_core_group = B x sum(t): the same items one after the other on one CG."""
    rows, start = [], 0.0
    for r, (a, b) in enumerate(lay.stages):
        bw, lat = _link(hw, lay, r, (r + 1) % lay.ranks)
        t = sum(times[a:b])
        c = lat + sends[r] / bw
        rows.append({"rank": r, "items": lay.batch, "kernels": [a, b], "compute_seconds": t, "send_seconds": c,
                     "start_seconds": start, "end_seconds": start + t})
        start += t + c
    step = max(x["compute_seconds"] + x["send_seconds"] for x in rows)
    total = start + (lay.batch - 1) * step
    one = lay.batch * sum(times)
    return {"one_core_group_seconds": one, "stage_step_seconds": step, "modeled_seconds": total,
            "communication_seconds": sum(x["send_seconds"] for x in rows) * lay.batch,
            "speedup_over_one_core_group": one / total if total > 0 else None, "ranks": rows,
            "how": "stages balanced over the kernels' modelled seconds plus the cut's send time; modeled = "
                   "fill (sum of stage+send) + (B-1) x slowest stage; one_core_group = B x all kernels"}


def _bytes(spec):
    import numpy as np
    n = 1
    for d in spec["shape"]:
        n *= int(d)
    return n * np.dtype(spec.get("dtype", "float32")).itemsize


def job_batch(job):
    """The whole batch of a job: the recipe's/--set batch, else the first input's first dimension."""
    if job.batch:
        return int(job.batch)
    shapes = list((job.input_shapes or {}).values())
    return int(shapes[0][0]) if shapes and shapes[0] else None


def compile_hook(job, tc):
    """(input shapes, batch, post) for compile_to: unchanged for one core group; for R ranks the
    rank program's shapes (batch m) and a post step that adds the MPI files, the whole-batch
    plan and the cost model (which compiles the whole batch for one core group to compare)."""
    lay = layout_of(job.options, job_batch(job), job.name, tc)
    if lay is None:
        return job.input_shapes, job.batch, None
    from .. import __version__
    from ..backends import family_of
    from .compiler import build_program

    def post(program, files, plan):
        if lay.parallel == "pipeline":
            return _pipeline_post(program, files, plan)
        files = dict(files, **family_of(tc).mpi_render(program, tc, lay, __version__))
        one = build_program(job.model, tc, job.name, job.input_shapes, lay.batch, job.options)
        doc = model(tc.hardware, lay, plan, family_of(tc).plan(one, tc))
        return files, global_plan(plan, lay, doc)

    def _pipeline_post(program, files, plan):
        from ..optimizer.stages import balance, cut_bytes
        times = [float(k["modeled_seconds"]) for k in plan["kernels"]]
        if lay.ranks > len(times):
            raise SwbuildError(f"model {job.name}: parallel=pipeline over {lay.ranks} ranks needs as many kernels; "
                               f"it has {len(times)}")
        bw, lat = _link(tc.hardware, lay, 0)
        cuts = {b: cut_bytes(program, b) for b in range(1, len(times))}
        stages = balance(times, lay.ranks, lambda b: lat + cuts[b] / bw)
        staged = dataclasses.replace(lay, stages=tuple(stages))
        files = dict(files, **family_of(tc).mpi_render(program, tc, staged, __version__))
        out_bytes = sum(_bytes(s) for s in plan["outputs"])
        doc = pipeline_model(tc.hardware, staged, times, [cuts[a] for a, _ in stages[1:]] + [out_bytes])
        return files, global_plan(plan, staged, doc)
    return rank_shapes(job.input_shapes, lay), lay.rank_batch, post


# -- the report ----------------------------------------------------------------------------

def report(fam, plan, per_rank):
    """The MPI section of `swbuild report`: the layout, the cost model's per-rank times and
    speed-up, and what each rank measured (emulator counters, MPI bytes, wall seconds) and their sum."""
    f = findings(fam, plan, per_rank)
    return dict(plan["mpi"], measured={"ranks": f["ranks"], "sum": f["sum"]})


def plot(doc, path):
    """The ranks' modelled timelines (data: scatter wait, compute, gather; pipeline: each item's
    stage and send) as a PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SwbuildError("--plot needs matplotlib (pip install matplotlib)") from None
    m = doc["model"]
    fig, ax = plt.subplots(figsize=(8, 1 + 0.4 * len(m["ranks"])))
    for row in m["ranks"]:
        y = row["rank"]
        if doc["parallel"] == "pipeline":    # one bar per item, the stream advancing by the slowest stage
            for i in range(doc["batch"]):
                t0 = row["start_seconds"] + i * m["stage_step_seconds"]
                ax.barh(y, row["compute_seconds"] * 1e3, left=t0 * 1e3, color="#4477aa")
                ax.barh(y, row["send_seconds"] * 1e3, left=(t0 + row["compute_seconds"]) * 1e3, color="#ee6677")
            continue
        end = m["scatter_seconds"] + m["rank_compute_seconds"]
        ax.barh(y, row["start_seconds"] * 1e3, color="#bbbbbb")
        ax.barh(y, (row["end_seconds"] - row["start_seconds"]) * 1e3, left=row["start_seconds"] * 1e3, color="#4477aa")
        ax.barh(y, m["gather_seconds"] * 1e3, left=end * 1e3, color="#ee6677")
    ax.set_yticks([r["rank"] for r in m["ranks"]], [f"rank {r['rank']} ({r['items']})" for r in m["ranks"]])
    ax.invert_yaxis()
    ax.set_xlabel("modelled ms (grey: waiting for the scatter, blue: compute, red: gather / send)")
    ax.set_title(f"{doc['ranks']} ranks, batch {doc['batch']}: modelled speed-up "
                 f"{m['speedup_over_one_core_group']:.2f}x over one core group")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
