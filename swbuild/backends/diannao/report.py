"""The `swbuild report` document of a DianNao build and the emulator findings `swbuild
check` reads: the plan's statements (how many the mapper tensorized) joined with the BANG
emulator's statistics (cycles, instructions by intrinsic, bytes copied per direction,
on-chip peaks, rule violations).
"""
from __future__ import annotations


def emulator_findings(plan, stats):
    """Rule violations and cycles; kernels of the plan the emulator never saw."""
    if stats is None:
        return {"stats": "missing"}
    seen = {k["name"] for k in stats.get("kernels", [])}
    return {"violations": int(stats.get("violations", 0)),
            "write_conflicts": sum(int(k.get("write_conflicts", 0)) for k in stats.get("kernels", [])),
            "cycles": sum(int(k.get("cycles", 0)) for k in stats.get("kernels", [])),
            "missing_kernels": [k["name"] for k in plan["kernels"] if k["name"] not in seen],
            "nram_declared_bytes": stats.get("nram_declared_bytes", 0),
            "wram_declared_bytes": stats.get("wram_declared_bytes", 0),
            "sram_declared_bytes": stats.get("sram_declared_bytes", 0)}


def _add(into, d):
    for k, v in d.items():
        into[k] = into.get(k, 0) + int(v)


def build_report(plan, stats, tc):
    meas = {k["name"]: k for k in (stats or {}).get("kernels", [])}
    clock = float(tc.hardware.get("clock_hz", 1e9))
    kernels, instr, mbytes = [], {}, {}
    cycles = flops = 0
    for k in plan["kernels"]:
        m = meas.get(k["name"], {})
        c = int(m.get("cycles", 0))
        cycles += c
        flops += k["flops"]
        _add(instr, m.get("instructions", {}))
        _add(mbytes, m.get("memcpy_bytes", {}))
        n = k["compute_statements"]
        kernels.append({"name": k["name"], "op": k["op"], "node": k["node"], "fused": k["fused"], "class": k["class"],
                        "flops": k["flops"], "cycles": c, "launches": int(m.get("launches", 0)),
                        "modeled_seconds": c / clock,
                        "instructions": dict(sorted(m.get("instructions", {}).items())),
                        "memcpy_bytes": dict(sorted(m.get("memcpy_bytes", {}).items())),
                        "compute_statements": n, "tensorized_statements": k["tensorized_statements"],
                        "tensorized_fraction": k["tensorized_statements"] / n if n else 1.0,
                        "scalar_statements": k["scalar_statements"], "schedule": k.get("schedule", {}),
                        "nram_peak_bytes": int(m.get("nram_peak_bytes", 0)),
                        "wram_peak_bytes": int(m.get("wram_peak_bytes", 0)),
                        "sram_peak_bytes": int(m.get("sram_peak_bytes", 0)),
                        "nram_planned_bytes": k["nram_bytes"], "violations": int(m.get("violations", 0))})
    return {
        "model": plan["model"], "target": plan["target"], "family": "diannao", "partition": plan.get("partition", "on"),
        "kernel_launches": len(plan["kernels"]), "flops": flops,
        "cycles": cycles, "modeled_seconds": cycles / clock,
        "instructions": dict(sorted(instr.items())), "memcpy_bytes": dict(sorted(mbytes.items())),
        "tensorized_fraction": plan["tensorized_fraction"], "compute_statements": plan["compute_statements"],
        "tensorized_statements": plan["tensorized_statements"],
        "violations": int((stats or {}).get("violations", 0)),
        "nram_declared_bytes": (stats or {}).get("nram_declared_bytes", 0),
        "wram_declared_bytes": (stats or {}).get("wram_declared_bytes", 0),
        "sram_declared_bytes": (stats or {}).get("sram_declared_bytes", 0),
        "nram_budget_bytes": tc.nram_budget,
        "arena_bytes": plan["arena_bytes"], "arena_lower_bound": plan["arena_lower_bound"],
        "kernels": kernels,
    }
