"""Option `mesh_gemm` (SW26010): 1x1 convolutions run as SUMMA over the 8x8 mesh, their
operands passed along mesh rows and columns by register messages (kinds/mesh_gemm.py).

`on` takes the mesh schedule only where its modelled time is below the tile search's
(the draft's seconds, after row sharing), so it cannot make a kernel slower in the model;
`all` takes it wherever the kernel fits the pattern (tests, benchmarks). A chosen kernel
becomes a special kernel (`kind = "mesh"`): the later scheduling passes leave it alone, it
runs in its own launch, and its plan entry carries the exact `regcomm` counts that `swbuild
check` compares with the emulator's.
"""
from __future__ import annotations

from ...launches import plan_launches
from ..cost import model
from ..kinds.mesh_gemm import mesh_schedule
from ..schedule.ldm import ldm_budget


def _in_launch(program, k):
    """Whether k shares a launch with other kernels today (a mesh kernel runs alone: its
    spawn is then a new cost)."""
    if program.grouping is None:
        return False
    runs = plan_launches(program.prefix, program.kernels, program.grouping,
                         lambda x: x.kind == "compute")
    return any(k.name in ln.kernels and len(ln.kernels) > 1 for ln in runs)


def choose_mesh_kernels(program, target, options):
    """Option `mesh_gemm`: 1x1 convolutions as SUMMA over the mesh where they model faster (on), or wherever they fit (all)."""
    mode = str((options or {}).get("mesh_gemm", "off"))
    if mode == "off":
        return program
    hw, budget = target.hardware, ldm_budget(target, options)
    state = program.target_state
    for k in program.kernels:
        d = state.drafts.get(k.name)
        if k.kind != "compute" or d is None:
            continue
        s, why = mesh_schedule(k, hw, budget, target.api, program.graph)
        if s is None:
            continue
        if mode == "on":
            tiled = d.seconds + float(model.hwget(hw, "spawn_seconds")) * (not _in_launch(program, k))
            if s.modeled_seconds >= tiled:
                continue
        k.kind, k.schedule = "mesh", s
        del state.drafts[k.name]
        program.notes.append(f"{k.name}: {s}")
    return program


__all__ = ["choose_mesh_kernels"]
