#!/usr/bin/env python3
"""What buffer stitching on chip could keep in SRAM (issue 34), measured before it is built:
per grouped launch of a light model on diannao-emu (default options), every intermediate
tensor -- written by one kernel of the launch and read only by later kernels of the SAME
launch, not a graph output -- with

    bytes            the tensor's bytes (on GDRAM today)
    per_cluster      its bytes per cluster when rows are split over the 4 clusters (ceil of a
                     quarter of its rows); `fits` compares the launch's peak of these live at
                     once (liveness in launch order) plus the kernels' own SRAM use (weight
                     staging) with the SRAM cncc leaves (sram_bytes - sram_reserve_bytes)
    gdram_now        GDRAM bytes its writes and reads cost today (traffic.py's per-copy walk,
                     keyed by the GDRAM buffer: what residency would remove)
    halo_free        every consumer reads no row another cluster wrote under a rows split:
                     1x1 stride-1 convolutions and element-wise kernels (a 3x3 conv or a
                     pool reads a halo row from its neighbour cluster)
    cluster_rows     per kernel (producer first), the output rows a cluster covers in rows mode
                     (4 tasks x ceil(row tiles / 16) x R rows, schedule/conv.py); `aligned`:
                     the same for all, so cluster c would read back exactly the rows it wrote
    modes            the producer's and consumers' schedule mode (rows | clusters): a kernel
                     in clusters mode would have to go to rows mode, its weights then read by
                     every cluster: `weight_gdram_rows` estimates that as 4x the weight bytes
                     it reads today (clusters mode reads them once)

    python benchmarks/sram_residency_fit.py [--model resnet50]

Prints one JSON document (per launch, per intermediate, and totals against the model's
GDRAM bytes today).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


WEIGHTS_ONCE = ("clusters", "channels")   # modes whose weights leave GDRAM once per launch


def light_model(name):
    import onnx
    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def tensor_traffic(dk):
    """{(direction, GDRAM tensor root): bytes} over one launch of the kernel (16 tasks)."""
    from swbuild.backends.diannao.traffic import TASKS, Walker, _add, ev

    class ByTensor(Walker):
        def _outer(self, m, loops, env):
            if loops:
                return super()._outer(m, loops, env)
            n, segs = ev(m.params.get("n", 1), env), ev(m.params.get("segs", 1), env)
            b = self.bufs.get(m.ops["dst"][0])
            eb = b.elem_bytes if b is not None else 4
            g = m.ops["src"][0] if m.direction.startswith("GDRAM2") else m.ops["dst"][0] \
                if m.direction.endswith("2GDRAM") else ""
            key = (m.direction, self.bufs[g].tensor if g else "")
            return {key: eb * n * segs} if n > 0 and segs > 0 else {}

    w, out = ByTensor(dk.bufs), {}
    for c, k in TASKS:
        _add(out, w.count(dk.body, {"tc": c, "tk": k}))
    return out


def analyse(model):
    from swbuild.backends.diannao.stitch import launches_of
    from swbuild.config import toolchain
    from swbuild.driver.compiler import build_program
    tc = toolchain.load("diannao-emu")
    hw = tc.hardware
    sram = int(hw["sram_bytes"]) - int(hw["sram_reserve_bytes"])
    clusters = int(hw["clusters"])
    prog = build_program(str(light_model(model)), tc, model, options={})
    g, dev = prog.graph, prog.target_state.dev
    by = {dk.name: dk for dk in dev}
    nodes = {n.name: n for n in g.nodes}
    outputs = {prog.root(t) for t in prog.outputs}
    traffic = {dk.name: tensor_traffic(dk) for dk in dev}
    reads, writes = {}, {}
    for name, tr in traffic.items():
        for (d, t), b in tr.items():
            if d.startswith("GDRAM2") and t:
                reads.setdefault(t, {}).setdefault(name, 0)
                reads[t][name] += b
            elif d.endswith("2GDRAM") and t:
                writes.setdefault(t, {}).setdefault(name, 0)
                writes[t][name] += b
    # weights: read, never written by a kernel, not a model input (the re-laid-out copies
    # preprocess.py makes are not graph tensors)
    consts = {t for t in reads if t not in writes and t not in {prog.root(i) for i in prog.inputs}}
    total = sum(b for tr in traffic.values() for (d, _), b in tr.items() if "GDRAM" in d)

    def halo_free(dk):
        if dk.cls == "elementwise":
            return True
        n = nodes.get(dk.node)
        if dk.cls != "conv" or n is None or n.op != "Conv":
            return False
        return all(int(v) == 1 for v in n.attrs.get("kernel_shape", [0])) and \
            all(int(v) == 1 for v in n.attrs.get("strides", [1]))

    def weight_bytes(dk):
        return sum(b for t, rs in reads.items() for k, b in rs.items()
                   if k == dk.name and t in consts)

    added = set()
    launches, tot = [], {"intermediates": 0, "fitting_halo_free": 0, "gdram_removable": 0, "weight_gdram_added": 0}
    for ln in launches_of(prog):
        if not ln.stitched:
            continue
        pos = {k: i for i, k in enumerate(ln.kernels)}
        inter = []
        for t, ws in writes.items():
            if len(ws) != 1 or t in outputs:
                continue
            (p,) = ws
            rd = reads.get(t, {})
            if p not in pos or not rd or not all(r in pos and pos[r] > pos[p] for r in rd):
                continue
            shape = g.tensors[t].shape if t in g.tensors else None
            nb = int(by[p].bufs[next(n for n, b in by[p].bufs.items() if b.tensor == t)].elems) * 4
            rows = int(shape[2]) if shape is not None and len(shape) == 4 else 1
            per_cluster = nb // rows * -(-rows // clusters) if rows > 1 else nb
            cons = sorted(rd, key=pos.get)
            kinds = [by[p].info.get("mode", by[p].cls)] + [by[c].info.get("mode", by[c].cls) for c in cons]
            wadd = sum(3 * weight_bytes(by[k]) for k in [p] + cons if by[k].info.get("mode") in WEIGHTS_ONCE)
            crow = [4 * -(-by[k].info["NRT"] // 16) * by[k].info["R"] if by[k].info.get("mode") == "rows" else None
                    for k in [p] + cons]
            inter.append({"cluster_rows": crow, "aligned": None not in crow and len(set(crow)) == 1,
                          "tensor": t, "producer": p, "consumers": cons, "bytes": nb, "per_cluster": per_cluster,
                          "gdram_now": sum(ws.values()) + sum(rd.values()),
                          "halo_free": all(halo_free(by[c]) for c in cons), "modes": kinds,
                          "weight_gdram_rows": wadd, "first": pos[p], "last": max(pos[c] for c in cons)})
        own = max((int(by[k].info.get("sram_bytes", 0)) for k in ln.kernels), default=0)
        peak = max((sum(x["per_cluster"] for x in inter if x["first"] <= i <= x["last"])
                    for i in range(len(ln.kernels))), default=0)
        fits = peak + own <= sram
        launches.append({"launch": ln.name, "kernels": list(ln.kernels), "kernel_sram_bytes": own,
                         "peak_intermediate_per_cluster": peak, "sram_available": sram, "fits": fits,
                         "intermediates": inter})
        for x in inter:
            tot["intermediates"] += 1
            if fits and x["halo_free"]:
                tot["fitting_halo_free"] += 1
                tot["gdram_removable"] += x["gdram_now"]
                added.update(k for k in [x["producer"]] + x["consumers"] if by[k].info.get("mode") in WEIGHTS_ONCE)
    tot["weight_gdram_added"] = sum(3 * weight_bytes(by[k]) for k in added)
    kinds = {"weights_read": sum(b for t in consts for b in reads[t].values()),
             "activations_read": sum(b for t, rs in reads.items() if t not in consts for b in rs.values()),
             "activations_written": sum(b for ws in writes.values() for b in ws.values()),
             "in_launch_intermediates": sum(x["gdram_now"] for ln in launches for x in ln["intermediates"])}
    # activations read per byte of the tensors read (halo rows, input re-read per output-channel
    # block, each cluster reading the whole input in clusters mode): the kernels reading most
    amp = []
    for dk in dev:
        acts = {t: b for t, rs in reads.items() if t not in consts for k, b in rs.items() if k == dk.name}
        size = sum(int(next(b.elems * b.elem_bytes for b in dk.bufs.values() if b.tensor == t)) for t in acts)
        if size:
            amp.append({"kernel": dk.name, "mode": dk.info.get("mode", dk.cls), "read": sum(acts.values()),
                        "tensor_bytes": size, "ratio": round(sum(acts.values()) / size, 2)})
    amp.sort(key=lambda e: e["tensor_bytes"] - e["read"])
    return {"benchmark": "sram_residency_fit", "activation_reads_top": amp[:12], "model": model, "target": "diannao-emu",
            "gdram_bytes_predicted": total, "gdram_by_kind": kinds, "launches": launches, "totals": tot}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50", help="light model name (light_<name>.onnx)")
    a = ap.parse_args(argv)
    json.dump(analyse(a.model), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
