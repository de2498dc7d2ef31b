"""What a DianNao build writes: the generated files, how they compile, the plan document."""
from __future__ import annotations

from ...support.version import __version__
from ...support.names import UniqueNames
from ..common import CompileUnit, file_names, plan_head
from .devir import stmts
from .printer import Image, device_file, host_file, model_header, runner_file, weights_asm
from .stitch import launch_entries, launches_of
from .traffic import predicted_copy_bytes

# BANG C: device .mlu, host and runner in C++ (CNRT)
FILES = {"host": "{prefix}_host.cpp", "device": "{prefix}_device.mlu", "header": "{prefix}.h",
         "weights": "{prefix}_weights.bin", "weights_asm": "{prefix}_weights.S", "runner": "{prefix}_runner.cpp",
         "plan": "{prefix}.plan.json", "lock": "{prefix}.lock.json"}

# the .mlu with `device_cc` + flags.device (cncc, or g++ -x c++ against the BANG emulation
# header), host and runner with `host_cc`
UNITS = (CompileUnit("device", "device_cc", "device", ("device",)),
         CompileUnit("host", "host_cc", "host", ("host", "header")))


def arenas(program):
    out = {"NRAM": 0, "WRAM": 0, "SRAM": 0}
    for dk in program.target_state.dev:
        for space in out:
            out[space] = max(out[space], dk.info.get(f"{space.lower()}_bytes", 0))
    return out


def _names(program):
    names = UniqueNames(reserved={"workspace", "ws"}, avoid_prefix=program.prefix + "_")
    out = {("in", t): names(f"in:{t}", t) for t in program.inputs}
    out.update({("out", t): names(f"out:{t}", t) for t in program.outputs})
    return out


def render(program, tc):
    """{file name: bytes} of every generated source (the lock and plan are added by the caller)."""
    v = __version__
    st = program.target_state
    f = file_names(FILES, program.prefix)
    image = Image(program, st.store)
    names = _names(program)
    return {
        f["device"]: device_file(program, tc, v, st.dev, arenas(program)).encode(),
        f["host"]: host_file(program, tc, v, st.dev, image, names).encode(),
        f["header"]: model_header(program, v, names).encode(),
        f["weights"]: image.blob,      # a WeightsBlob: write_outputs streams it to the file
        f["weights_asm"]: weights_asm(program, image).encode(),
        f["runner"]: runner_file(program, v, tc.hardware["clock_hz"]).encode(),
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
    for sid in dk.info.get("scalar_sids", ()):   # printed as scalar C by a special kernel's own printer
        out[sid] = ("compute", False)
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
    kernels, tot, ten = [], 0, 0
    for dk in program.target_state.dev:
        sc = statement_counts(dk)
        comp = [v for v in sc.values() if v[0] == "compute"]
        tot += len(comp)
        ten += sum(1 for v in comp if v[1])
        info = {k: v for k, v in dk.info.items() if k not in ("fills",) and isinstance(v, (int, float, str, bool, dict))}
        info.pop("tile", None)
        copies, why = predicted_copy_bytes(dk)
        kernels.append({"name": dk.name, "op": dk.op, "node": dk.node, "fused": list(dk.fused), "class": dk.cls,
                        "flops": dk.flops, "compute_statements": len(comp),
                        "tensorized_statements": sum(1 for v in comp if v[1]),
                        "scalar_statements": sorted(k for k, v in sc.items() if v[0] == "compute" and not v[1]),
                        "static_instructions": static_instructions(dk), "nram_bytes": dk.info.get("nram_bytes", 0),
                        "wram_bytes": dk.info.get("wram_bytes", 0), "sram_bytes": dk.info.get("sram_bytes", 0),
                        "schedule": {k: v for k, v in info.items() if k in ("mode", "R", "Cob", "Cib", "NIB", "NRT", "NCB", "why",
                                                                         "narrow_in", "narrow_out", "transposed_input", "input_stationary",
                                                                         "folded_height", "fixed_point")},
                        "statements_after_partition": dk.info.get("statements_after_partition"),
                        "copy_bytes": copies, **({"copy_bytes_unpredicted": why} if why else {}),
                        **({"recurrence": dk.info["recurrence"]} if "recurrence" in dk.info else {})})
    return dict(plan_head(program, tc), **{
        "family": "diannao", "partition": "on" if program.target_state.partitioned else "off",
        "onchip_arenas": arenas(program),
        "on_chip_tensors": dict(sorted(program.target_state.on_chip.items())),   # residency.py: kept in SRAM
        "compute_statements": tot, "tensorized_statements": ten,
        "tensorized_fraction": (ten / tot) if tot else 1.0,
        "layouts": {t: "NHWC" for t in sorted(program.target_state.layouts)},
        "int8_storage": sorted(getattr(program.target_state, "int8_storage", ())),   # bytes in GDRAM (schedule/narrow.py)
        "notes": list(program.notes),
        "kernels": launch_entries(kernels, launches_of(program)),
    })

