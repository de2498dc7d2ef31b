"""DianNao backend (Cambricon MLU, BANG C): the pass list, the emitter and the plan.

    fuse epilogues → storage layouts (NHWC around convolutions, identity copies removed)
    → static arena → work split and staging (schedule) → loop partitioning (Algorithm 2,
    option `partition`) → pre-processing of what is left (Algorithm 1: extra computation,
    padded lengths) → instruction mapping (ISA Mapper) → BANG C.

See docs/diannao.md.
"""
from __future__ import annotations

from dataclasses import replace

from ... import __version__
from ...optimizer.fuse import fuse_epilogues
from ...optimizer.memory import plan_memory
from .devir import stmts
from .layout import choose_layouts, eliminate_identity_copies
from .mapper import map_kernel, map_stmt
from ...recipe import option_on
from .partition import partition_kernel
from .preprocess import align_extents, choose_fills, resolve_guards
from .schedule import Store, schedule_kernel


def _layouts(p, tc, o):
    p.layouts = choose_layouts(p)
    return eliminate_identity_copies(p, p.layouts)


def _schedule(p, tc, o):
    p.store = Store()
    p.dev = [schedule_kernel(k, p, tc, p.layouts, p.store) for k in p.kernels]
    return p


def _whole_fills(p, tc, o):
    """Remember each halo fill unguarded: after partitioning, one fill of the whole tile may
    beat its fragments (preprocess.choose_fills)."""
    for dk in p.dev:
        dk.info["fills"] = {s.sid: {"whole": replace(s, guard=(), guard_any=())}
                            for s in stmts(dk.body) if s.kind == "fill" and s.note == "halo"}
    return p


def _partition(p, tc, o):
    p.partitioned = option_on(o, "partition")
    if p.partitioned:
        for dk in p.dev:
            partition_kernel(dk)
    return p


def _resolve(p, tc, o):
    for dk in p.dev:
        dk.body = resolve_guards(dk.body)
        align_extents(dk.body, dk, tc.hardware)
    return p


def _map(p, tc, o):
    for dk in p.dev:
        map_kernel(dk, tc.hardware)
        for f in dk.info.get("fills", {}).values():
            w = f["whole"]
            w.mapped = map_stmt(w, dk, tc.hardware, {})
            f["whole"] = w if w.mapped else None
        if option_on(o, "partition"):
            choose_fills(dk.body, dk, tc.hardware)
    return p


# The per-target pipeline, a plain list of passes (TVM Relax style): Program -> Program.
PIPELINE = [
    lambda p, tc, o: fuse_epilogues(p),
    _layouts,
    lambda p, tc, o: plan_memory(p),
    _schedule,
    _whole_fills,
    _partition,
    _resolve,
    _map,
]


def optimize(program, tc, options):
    for pass_ in PIPELINE:
        program = pass_(program, tc, options)
    return program


def arenas(program):
    out = {"NRAM": 0, "WRAM": 0, "SRAM": 0}
    for dk in program.dev:
        for space in out:
            out[space] = max(out[space], dk.info.get(f"{space.lower()}_bytes", 0))
    return out


def _names(program):
    from ...names import UniqueNames
    names = UniqueNames(reserved={"workspace", "ws"}, avoid_prefix=program.prefix + "_")
    out = {("in", t): names(f"in:{t}", t) for t in program.inputs}
    out.update({("out", t): names(f"out:{t}", t) for t in program.outputs})
    return out


def render(program, tc):
    """{file name: bytes} of every generated source (the lock and plan are added by the caller)."""
    from ...build import generated_files
    from .printer import Image, device_file, host_file, model_header, runner_file, weights_asm
    v = __version__
    f = generated_files(program.prefix, "diannao")
    image = Image(program, program.store)
    names = _names(program)
    return {
        f["device"]: device_file(program, tc, v, program.dev, arenas(program)).encode(),
        f["host"]: host_file(program, tc, v, program.dev, image, names).encode(),
        f["header"]: model_header(program, v, names).encode(),
        f["weights"]: bytes(image.blob),
        f["weights_asm"]: weights_asm(program, image).encode(),
        f["runner"]: runner_file(program, v).encode(),
    }


def statement_counts(dk):
    """{sid: (kind, tensorized?)} over the kernel's source statements."""
    out = {}
    if dk.cls == "scalar":
        return {dk.info["scalar_sid"]: ("compute", False)}
    for s in stmts(dk.body):
        kind = s.kind
        prev = out.get(s.sid, (kind, True))
        out[s.sid] = (kind, prev[1] and s.mapped is not None)
    for sid, kind in dk.stmts.items():    # statements partitioning removed everywhere count as done
        out.setdefault(sid, (kind, True))
    return out


def static_instructions(dk):
    counts = {}
    for s in stmts(dk.body):
        name = s.mapped.name if s.mapped else "scalar"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def plan(program, tc):
    """The plan document (swbuild check/report read it): per kernel its class, work split,
    on-chip use, statements and how many the mapper turned into instructions."""
    g = program.graph
    kernels, tot, ten = [], 0, 0
    for dk in program.dev:
        sc = statement_counts(dk)
        comp = [v for v in sc.values() if v[0] == "compute"]
        tot += len(comp)
        ten += sum(1 for v in comp if v[1])
        info = {k: v for k, v in dk.info.items() if k not in ("fills",) and isinstance(v, (int, float, str, bool, dict))}
        info.pop("tile", None)
        kernels.append({"name": dk.name, "op": dk.op, "node": dk.node, "fused": list(dk.fused), "class": dk.cls,
                        "flops": dk.flops, "compute_statements": len(comp),
                        "tensorized_statements": sum(1 for v in comp if v[1]),
                        "scalar_statements": sorted(k for k, v in sc.items() if v[0] == "compute" and not v[1]),
                        "static_instructions": static_instructions(dk), "nram_bytes": dk.info.get("nram_bytes", 0),
                        "wram_bytes": dk.info.get("wram_bytes", 0), "sram_bytes": dk.info.get("sram_bytes", 0),
                        "schedule": {k: v for k, v in info.items() if k in ("mode", "R", "Cob", "Cib", "NIB", "NRT", "NCB", "why")},
                        "statements_after_partition": dk.info.get("statements_after_partition")})
    return {
        "model": program.name, "prefix": program.prefix, "target": tc.name, "family": "diannao",
        "swbuild_version": __version__, "partition": "on" if getattr(program, "partitioned", True) else "off",
        "inputs": [{"name": t, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in program.inputs],
        "outputs": [{"name": t, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in program.outputs],
        "arena_bytes": program.memory.arena_bytes, "arena_lower_bound": program.memory.lower_bound,
        "onchip_arenas": arenas(program),
        "compute_statements": tot, "tensorized_statements": ten,
        "tensorized_fraction": (ten / tot) if tot else 1.0,
        "layouts": {t: "NHWC" for t in sorted(program.layouts)},
        "notes": list(program.notes),
        "kernels": kernels,
    }

