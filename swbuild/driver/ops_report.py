"""`swbuild ops MODEL --target T`: per node of a model, whether the target takes it and, if
not, why (operator, attribute or mode, dtype, local memory).

The model goes through the same import, lowering and target pipeline as a compile, node by
node where the compile stops at the first error: every lowering runs on its own, and the
pipeline runs on the kernels that lowered. Nothing is written to disk.
"""
from __future__ import annotations

import collections

from ..support.errors import ModelError, SwbuildError, UnknownInputs, UnsupportedError

STATUS = ("supported", "folded", "fused", "unsupported", "unchecked")


MAX_REFUSED = 8     # kernels the target may refuse before the rest is left unchecked


def analyse(model, tc, name, input_shapes=None, batch=None, options=None) -> dict:
    """The per-node document: {model, target, family, nodes: [{node, op, status, detail}], problems}.
    A kernel the target refuses (local memory) is left out and the pipeline runs again over
    the others, so every node gets its own answer (up to MAX_REFUSED refusals)."""
    from ..backends import family_of
    fam = family_of(tc)
    refused = {}
    while True:
        doc = {"model": name, "target": tc.name, "family": tc.family, "nodes": [], "problems": []}
        low = _lower(model, name, input_shapes, batch, doc)
        if low is None:
            return _count(doc)
        original, imported, graph, rows, kernels_of, program, paths = low
        program.kernels = [k for k in program.kernels if k.name not in refused]
        by_kernel, refusal = _target_pass(program, tc, fam, options or {}, doc)
        if refusal is None or not refusal[0] or len(refused) >= MAX_REFUSED:
            break       # done, a whole-model problem (in doc["problems"]), or too many refusals
        refused[refusal[0]] = refusal[1]
    complete = refusal is None
    if refusal is not None and refusal[0]:
        doc["problems"].append(f"{refusal[1]}; the {fam.name} pipeline stopped there after {len(refused)} other "
                               "refused kernels: later kernels are not checked")
        refused[refusal[0]] = refusal[1]
    node_of_kernel = {k: n for n, ks in kernels_of.items() for k in ks}
    for kname, why in refused.items():
        n = node_of_kernel.get(kname)
        if n is not None:
            rows[n] = _row(n, None, "unsupported", why if rows.get(n) is None else f"{rows[n]['detail']}; {why}")
    names = {x.name for x in graph.nodes}
    for n, op in original:
        if n not in imported:
            doc["nodes"].append(_row(n, op, "folded", "computed at compile time (constant inputs) or unused"))
        elif n not in names:
            doc["nodes"].append(_row(n, op, "folded", "folded into its neighbour (BatchNormalization into the "
                                                      "convolution before it) or unused"))
        elif rows.get(n) is not None:
            doc["nodes"].append({**rows[n], "op": op})
        else:
            doc["nodes"].append(_row(n, op, *_lowered(kernels_of.get(n, []), by_kernel, complete,
                                                      fam.summary, program.prefix)))
        if n in paths and doc["nodes"][-1]["status"] != "folded":
            doc["nodes"][-1]["dtype_path"] = paths[n]
            doc["nodes"][-1]["detail"] = f"{paths[n]}; {doc['nodes'][-1]['detail']}"
    return _count(doc)


INDEX_ONLY = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")     # views: no arithmetic


def dtype_path(graph, notes, node):
    """How a node treats dtypes, when it touches quantized integers (ops/quant.py's note, or
    the integer dtypes a layout op copies as exact float32), else None."""
    if node.name in notes or node.name in graph.qdq_notes:
        # the lowering's note; qdq_fuse's: why a chain stays float, or that onnxruntime keeps it float
        text = "; ".join(t for t in (notes.get(node.name), graph.qdq_notes.get(node.name)) if t)
        u8 = [t for t in list(node.inputs) + list(node.outputs) if t in graph.rebiased]
        if node.op.startswith("com.microsoft."):        # zero points kept, the 128 added back (ops/quant_ms.py)
            held = "uint8 held as int8 (value - 128; the kernel adds 128 back and computes on the uint8 values, "
        else:
            held = "uint8 held as int8 (value - 128, zero point - 128: the same real values, "
        return text + (f"; {held}optimizer/uint8_as_int8.py)" if u8 and node.name in notes else "")
    ts = list(node.inputs) + list(node.outputs)
    held = sorted({graph.exact_ints[t] for t in ts if t in graph.exact_ints})
    if held:
        return f"{', '.join(held)} values held as exact float32"
    if any(t in graph.widened for t in ts):
        return "float16 computed and stored as float32 (converted at the model's boundary)"
    run = {graph.tensors[t].dtype for t in ts if t in graph.tensors and graph.tensors[t].data is None}
    if node.op not in ("Cast", "CastLike") and run & {"float64", "int32", "int64"} and node.op not in INDEX_ONLY:
        what = "; ".join(p for d, p in (("float64", "float64 computed in double"),
                                         ("int64", "int64 in C's long long"), ("int32", "int32 in C's int")) if d in run)
        return f"{what} (Sunway, exact; refused on DianNao)"
    if node.op in ("Cast", "CastLike") and {graph.tensors[t].dtype for t in ts if t in graph.tensors} >= {"float16", "float32"}:
        return "float16 <-> float32 conversion at the model's boundary (round to nearest even)"
    return None


def _lower(model, name, input_shapes, batch, doc):
    """Import and lower node by node: (original nodes, imported names, graph, {node: row of an
    unsupported node}, {node: its kernels}, program), or None when the model as a whole is refused."""
    from ..frontends.onnx import import_model, load_model
    from .lowering import LOWERINGS, boundary_problem, finish, node_problem, prepare
    proto = load_model(model)
    original = [(n.name or f"{n.op_type}_{k}", n.op_type) for k, n in enumerate(proto.graph.node)]
    try:
        graph = import_model(proto, input_shapes=input_shapes, batch=batch, name=name)
    except (ModelError, UnsupportedError) as e:     # the model as a whole (inputs, domains, subgraphs)
        doc["problems"].append(str(e))
        doc["nodes"] = [_row(n, op, "unchecked", "the model was refused before its nodes (see problems)")
                        for n, op in original]
        return None
    del proto
    imported = {n.name for n in graph.nodes}
    graph, ctx = prepare(graph, name)
    rows, kernels_of = {}, {}
    for node in graph.nodes:
        why = node_problem(graph, node)
        if why is None:
            first = len(ctx.kernels)
            try:
                LOWERINGS[node.op](ctx, node)
            except UnsupportedError as e:
                why = e.reason
            except Exception as e:       # a lowering's bug: still this node's row, not a traceback
                why = f"node '{node.name}' ({node.op}): internal error {type(e).__name__}: {e}"
            kernels_of[node.name] = [k.name for k in ctx.kernels[first:]]
        rows[node.name] = _row(node.name, node.op, "unsupported", why) if why else None
    paths = {n.name: p for n in graph.nodes if (p := dtype_path(graph, ctx.notes, n))}
    why = boundary_problem(graph)
    if why:
        doc["problems"].append(why)
    return original, imported, graph, rows, kernels_of, finish(ctx, name), paths


def _target_pass(program, tc, fam, options, doc):
    """({kernel name: its plan entry}, None) from running the family's pipeline over the
    kernels that lowered, or ({}, (kernel, reason)) when the target refuses a kernel."""
    from .compiler import check_main_memory
    if not program.kernels:
        return {}, None
    try:
        program = fam.optimize(program, tc, options)
        check_main_memory(program, tc)
        plan = fam.plan(program, tc)
    except SwbuildError as e:
        kernel = getattr(e, "kernel", None)
        if kernel:
            return {}, (kernel, str(e))
        doc["problems"].append(str(e))
        return {}, ("", str(e))
    except Exception as e:   # e.g. a pipeline that needs the nodes that did not lower
        doc["problems"].append(f"the {fam.name} pipeline did not run over the nodes that lowered "
                               f"({type(e).__name__}: {e}); fix the unsupported nodes first")
        return {}, ("", str(e))
    entries = {}
    for k in plan.get("kernels", []):
        entries[k["name"]] = k
        entries.update((sub["name"], sub) for sub in k.get("kernels", ()))    # a grouped launch's kernels
    return entries, None


def _lowered(kernels, by_kernel, complete, summary, prefix):
    """(status, detail) of a node whose lowering succeeded."""
    if not kernels:
        return "supported", "no kernel: a view of its input (reshape-like) or an empty tensor"
    if not complete:
        return "unchecked", "lowered; the target's pipeline stopped before it (see problems)"
    parts = []
    for k in kernels:
        info = by_kernel.get(k)
        short = k.removeprefix(prefix + "_")
        if info is None:
            parts.append(f"{short}: fused into a neighbouring kernel")
        else:
            parts.append(f"{short}: {summary.kernel_note(info)}")
    status = "fused" if all(by_kernel.get(k) is None for k in kernels) else "supported"
    return status, "; ".join(parts)


def _row(node, op, status, detail):
    return {"node": node, "op": op, "status": status, "detail": detail}


def _count(doc):
    doc["counts"] = {s: sum(1 for r in doc["nodes"] if r["status"] == s) for s in STATUS}
    doc["supported"] = not doc["problems"] and doc["counts"]["unsupported"] == doc["counts"]["unchecked"] == 0
    return doc


def format_table(doc) -> str:
    c = doc["counts"]
    head = (f"{doc['model']} on {doc['target']} ({doc['family']}): {len(doc['nodes'])} nodes: "
            + ", ".join(f"{c[s]} {s}" for s in STATUS if c[s]) + (" -- supported" if doc["supported"] else " -- NOT supported"))
    w_node = min(max([4] + [len(r["node"]) for r in doc["nodes"]]), 28)
    w_op = max([2] + [len(r["op"] or "") for r in doc["nodes"]])
    lines = [head, f"{'node':<{w_node}}  {'op':<{w_op}}  {'status':<11}  detail"]
    folded = collections.Counter()
    for r in doc["nodes"]:
        if r["status"] == "folded":     # constant subgraphs (shape arithmetic): one summary line, not hundreds
            folded[r["op"]] += 1
            continue
        lines.append(f"{r['node'][:w_node]:<{w_node}}  {r['op'] or '':<{w_op}}  {r['status']:<11}  {r['detail']}")
    if folded:
        lines.append(f"folded at compile time or into a neighbour: {sum(folded.values())} nodes ("
                     + ", ".join(f"{op} {n}" for op, n in sorted(folded.items())) + "); --json lists each")
    lines += [f"problem: {p}" for p in doc["problems"]]
    return "\n".join(lines)


def target_list(tc) -> str:
    """The operators a target takes, with what its family does with them."""
    from ..backends import family_of
    from ..ops import supported_ops
    ops = supported_ops()
    return "\n".join([f"{tc.name} ({tc.family}): {len(ops)} ONNX operators; {family_of(tc).summary.OPS_NOTE}.",
                      f"Check a model node by node: swbuild ops MODEL.onnx --target {tc.name}"] + ops)


__all__ = ["analyse", "format_table", "target_list", "UnknownInputs"]
