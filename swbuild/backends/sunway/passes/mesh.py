"""Option `mesh_gemm` (SW26010): 1x1 convolutions run as SUMMA over the 8x8 mesh, their
operands passed along mesh rows and columns by register messages (kinds/mesh_gemm.py).

`on` takes the mesh schedule only where its modelled time is below the tile search's
(the draft's seconds, after row sharing), so it cannot make a kernel slower in the model;
`all` takes it wherever the kernel fits the pattern (tests, benchmarks). Chains first: a 1x1
convolution whose output only the next kernel, another 1x1 convolution, reads becomes part
of that kernel (kinds/mesh_chain.py: the intermediate stays in the 64 LDMs), under the same
rule (`on`: where the pair models faster than its two tiled kernels). A chosen kernel
becomes a special kernel (`kind = "mesh"`): the later scheduling passes leave it alone, it
runs in its own launch (passes/stitch.py; the choice counts the spawns that adds), and its
plan entry carries the exact `regcomm` counts that `swbuild
check` compares with the emulator's.
"""
from __future__ import annotations

from .stitch import launch_runs
from ..cost import model
from dataclasses import replace

from ..kinds.mesh_chain import chain_schedule
from ..kinds.mesh_chain_c import first_name
from ..kinds.mesh_gemm import mesh_schedule, relayout_weights
from ..schedule.ldm import ldm_budget
from ..schedule.passes import drop_unused_constants


def _launch_spawns(program, k):
    """Spawns k costs as a mesh kernel beyond what it costs where it is (a mesh kernel runs
    alone, passes/stitch.py): its own when it shares a launch, plus one when it sits inside
    its launch's run and cuts it in two; none when it runs alone already (its spawn is in
    both)."""
    if program.grouping is None:
        return 0
    runs = launch_runs(program, lambda x: x.kind == "compute")
    for ln in runs:
        if k.name in ln.kernels and len(ln.kernels) > 1:
            return 1 + (ln.kernels[0] != k.name and ln.kernels[-1] != k.name)
    return 0


def choose_mesh_kernels(program, target, options):
    """Option `mesh_gemm`: 1x1 convolutions as SUMMA over the mesh where they model faster (on), or wherever they fit (all)."""
    mode = str((options or {}).get("mesh_gemm", "off"))
    if mode == "off":
        return program
    hw, budget = target.hardware, ldm_budget(target, options)
    state = program.target_state
    relaid = _choose_chains(program, target, mode, hw, budget)
    for k in program.kernels:
        d = state.drafts.get(k.name)
        if k.kind != "compute" or d is None:
            continue
        s, why = mesh_schedule(k, hw, budget, target.api, program.graph)
        if s is None:
            continue
        spawn = float(model.hwget(hw, "spawn_seconds"))      # mesh's modelled time includes one
        if mode == "on" and s.modeled_seconds + spawn * (_launch_spawns(program, k) - 1) >= d.seconds:
            continue
        k.kind, k.schedule = "mesh", s
        relaid.add(relayout_weights(k, program.graph, s.shape.w, s.mc, s.kc))
        del state.drafts[k.name]
        program.notes.append(f"{k.name}: {s}")
    drop_unused_constants(program, relaid)
    return program


def _sole_reader(program, k1, k2):
    """Whether k2 is the only reader of k1's output and that output is no graph output,
    alias or Concat part (its bytes then need never exist)."""
    root = program.root(k1.buffers[k1.out].tensor)
    if root in program.outputs or root in program.inputs or any(program.root(a) == root for a in program.aliases) \
            or any(k1.out_offset):
        return False
    readers = [k for k in program.kernels if k is not k1
               and any(program.root(b.tensor) == root for b in k.buffers.values())]
    return readers == [k2] and sum(program.root(b.tensor) == root for b in k2.buffers.values()) == 1


def _choose_chains(program, target, mode, hw, budget):
    state, spawn = program.target_state, float(model.hwget(hw, "spawn_seconds"))
    relaid = set()
    i = 0
    while i + 1 < len(program.kernels):
        k1, k2 = program.kernels[i], program.kernels[i + 1]
        d1, d2 = state.drafts.get(k1.name), state.drafts.get(k2.name)
        if d1 is None or d2 is None or k1.kind != "compute" or k2.kind != "compute" or not _sole_reader(program, k1, k2):
            i += 1
            continue
        s, why = chain_schedule(k1, k2, hw, budget, target.api, program.graph)
        # one kernel instead of two, alone: the spawns it adds (k2's launch position, as k1's goes)
        extra = max(_launch_spawns(program, k1), _launch_spawns(program, k2))
        if s is None or (mode == "on" and s.modeled_seconds + spawn * (extra - 1) >= d1.seconds + d2.seconds):
            i += 1
            continue
        relaid.add(relayout_weights(k1, program.graph, s.g1.w, s.mc1, s.kc1))
        relaid.add(relayout_weights(k2, program.graph, s.g2.w, s.mc2, s.mc1))
        for name, b in k1.buffers.items():       # the producer's inputs join the consumer's struct
            if name != k1.out:
                k2.buffers[first_name(name)] = replace(b, name=first_name(name))
        k2.kind, k2.schedule = "mesh_chain", s
        k2.fused = (k1.node, *k1.fused, *k2.fused)
        del state.drafts[k1.name], state.drafts[k2.name]
        program.kernels.remove(k1)
        program.notes.append(f"{k1.name} + {k2.name}: {s}")
    return relaid


__all__ = ["choose_mesh_kernels"]
