"""GraphTurbo grouping (option `grouping`): which kernels of the fused graph form groups,
how each group splits into instances, their order, core binding and buffer scope.

    split_info.py  Algorithm 1: SplitInfo of a group from the target's local memory and cores
    merge.py       Algorithm 2: straight, diamond and branch merges under the two rules
    instances.py   Algorithm 3: instances, their edges, BFS or DFS order
    binding.py     Algorithm 4: core binding, buffer scope, data movement

The result (`Grouping`) is target-neutral data on `program.grouping`; a family's kernel
generator realises it (or reports which groups it runs kernel by kernel).
"""
from __future__ import annotations

from dataclasses import dataclass

from .binding import Move, bind_cores, scopes_and_moves
from .instances import Edge, Instance, choose_order, instance_edges, instance_io
from .kgraph import box_points, containing, kernel_graph, out_root, tensor_bytes, written
from .merge import merge_groups
from .split_info import Budget, SplitInfo, instance_boxes

__all__ = ["Budget", "Edge", "Group", "Grouping", "Instance", "Move", "SplitInfo", "group_kernels", "grouping_of",
           "model_compulsory_bytes", "target_budget"]


@dataclass(frozen=True)
class Group:
    gid: int
    kernels: tuple        # kernel names, program order
    ops: tuple            # their ops (with what each fused), for reports
    sinks: tuple          # kernels whose output leaves the group
    split: SplitInfo
    inputs: tuple         # activation roots read from outside (graph inputs, other groups)
    outputs: tuple        # roots the sinks write
    intermediates: tuple  # roots made and used inside only: they stay in local memory
    reused: tuple = ()    # outputs that are also read inside the group

    def __str__(self):
        return f"group {self.gid}: {' '.join(self.ops)}  split {self.split}"

    def to_json(self):
        s = self.split
        return {"group": self.gid, "kernels": list(self.kernels), "ops": list(self.ops),
                "split": {"axis": s.axis, "dim": s.dim, "factor": s.factor, "cores": s.cores,
                          "footprint_bytes": s.footprint, "recompute": s.recompute, "fits": s.fits},
                "intermediates": list(self.intermediates), "outputs": list(self.outputs)}


@dataclass(frozen=True)
class Grouping:
    budget: Budget
    groups: tuple
    order_kind: str       # "bfs" | "dfs"
    peaks: tuple          # ((kind, peak bytes of held instance outputs), ...)
    order: tuple          # Instance, in the chosen order, with its core
    edges: int            # instance edges kept
    dropped_edges: int    # producer/consumer instance pairs that share no data
    scopes: tuple         # (root, "local" | "global"), sorted
    moves: tuple          # Move
    planned_bytes: int = 0   # main-memory traffic of the plan if realised (planned_traffic)
    stitched: tuple = ()     # (producer, consumer, tensor): producers recomputed in their consumer's local memory

    def group_of(self, kernel):
        return next((g for g in self.groups if kernel in g.kernels), None)

    def __str__(self):
        lines = [f"grouping: {len(self.groups)} groups, {len(self.order)} instances ({self.order_kind} order, "
                 f"peaks {dict(self.peaks)}), {self.edges} instance edges ({self.dropped_edges} dropped), "
                 f"local memory {self.budget.local_bytes} B x {self.budget.cores} cores, "
                 f"planned traffic {self.planned_bytes} B"]
        for g in self.groups:
            lines.append("  " + str(g))
        local = [r for r, s in self.scopes if s == "local"]
        lines.append(f"  local tensors: {len(local)} of {len(self.scopes)}")
        lines += [f"  move {m}" for m in self.moves]
        lines += [f"  stitched {p} into {c} (%{t} stays in local memory)" for p, c, t in self.stitched]
        return "\n".join(lines)

    def to_json(self):
        cores, scope = {}, dict(self.scopes)
        for ins in self.order:
            cores.setdefault(ins.group, []).append(ins.core)
        groups = [dict(g.to_json(), binding=sorted(cores.get(g.gid, [])),
                       scope={r: scope.get(r, "global") for r in g.outputs}) for g in self.groups]
        return {"groups": groups, "order": self.order_kind, "peaks": dict(self.peaks),
                "instances": len(self.order), "instance_edges": self.edges, "dropped_edges": self.dropped_edges,
                "local_tensors": sum(1 for _, s in self.scopes if s == "local"),
                "moves": [{"kind": m.kind, "tensor": m.tensor, "count": m.count} for m in self.moves],
                "planned_main_memory_bytes": self.planned_bytes,
                "stitched": [{"producer": p, "consumer": c, "tensor": t} for p, c, t in self.stitched]}


def target_budget(target, options):
    """What an instance is bound to and the local memory it has, from the toolchain file.

    Sunway: an instance is one athread_spawn over the whole core group, so the unit is the
    core group and its local memory the CPEs' LDM together (cpes x the LDM budget, after
    the recipe's ldm_reserve); one 64 KB LDM cannot hold even one row of a ResNet layer.
    Core groups beyond one are the MPI issue's data parallelism (the paper's d > 1).
    DianNao: an instance is bound to one core with its NRAM, as in the paper."""
    hw = target.hardware
    if "ldm_bytes" in hw:
        per_cpe = target.ldm_budget
        if (options or {}).get("ldm_reserve") not in (None, "auto"):
            per_cpe = int(hw["ldm_bytes"]) - int(options["ldm_reserve"])
        return Budget(local_bytes=int(per_cpe) * int(hw["cpes"]), cores=1)
    return Budget(local_bytes=int(target.nram_budget), cores=target.cores)


def grouping_on(options):
    """Option `grouping`, on unless the options turn it off (the default is on: it models
    faster on every light model on both families' targets, docs/grouping.md)."""
    return str((options or {}).get("grouping", "on")).lower() not in ("off", "false", "0", "no")


def grouping_of(program, budget):
    """The Grouping of a fused program's kernels under `budget`."""
    kg = kernel_graph(program)
    m = merge_groups(program, kg, budget)
    kernels = {k.name: k for k in program.kernels}
    groups = []
    for gid, members in enumerate(m.groups):
        names = tuple(sorted(members, key=m.order.get))
        sinks = m.sinks(members)
        made = {r for n in names for r in written(program, kernels[n])}
        inputs = sorted({r for n in names for r in kg.reads[n] if r not in kg.constants
                         and (r not in made or set(kg.writers_before(n, r)) - members)})
        outs = tuple(dict.fromkeys(out_root(program, kernels[n]) for n in names if n in sinks))
        inter = tuple(dict.fromkeys(r for r in (out_root(program, kernels[n]) for n in names if n not in sinks)
                                    if r not in outs))
        reused = tuple(r for r in outs if any(c in members for c in kg.readers(r, program)))
        ops = tuple("+".join((kernels[n].op,) + tuple(kernels[n].fused)) for n in names)
        groups.append(Group(gid, names, ops, tuple(n for n in names if n in sinks), m.split(members),
                            tuple(inputs), outs, inter, reused))
    io = instance_io(program, groups, kernels)
    edges, dropped = instance_edges(io)
    kind, order, peaks = choose_order(io, edges, budget.itemsize)
    core = bind_cores(groups, edges, budget.cores)
    nbytes = {r: tensor_bytes(program, r) for g in groups for r in g.outputs}
    around = {r: containing(program, r) for r in nbytes}
    scope, moves = scopes_and_moves(groups, edges, core, kg.graph_io, nbytes, budget.local_bytes, around)
    traffic = planned_traffic(program, groups, kernels, scope, kg)
    return Grouping(budget, tuple(groups), kind, tuple(sorted(peaks.items())),
                    tuple(Instance(g, i, core[(g, i)]) for g, i in order), len(edges), dropped,
                    tuple(sorted(scope.items())), tuple(moves), traffic)


def planned_traffic(program, groups, kernels, scope, kg):
    """Main-memory bytes the plan implies if every group ran as its instances: per instance
    the weight slabs, graph inputs and main-memory tensors it reads (its boxes), and the
    main-memory tensors it writes. Tensors kept local cost nothing; the halo of a split is
    read again by both instances. Groups that do not fit count as one instance."""
    total = 0
    for g in groups:
        ks = [kernels[n] for n in g.kernels]
        f = g.split.factor if g.split.fits else 1
        for i in range(f):
            need, external = instance_boxes(program, ks, set(g.sinks), g.split.dim, f, i)
            for r, (nbytes, const) in external.items():
                if const or r in kg.graph_io or scope.get(r, "global") == "global":
                    total += nbytes
            for n in g.sinks:
                if scope.get(out_root(program, kernels[n]), "global") == "global":
                    total += box_points(need[n]) * 4
    return total


def group_kernels(program, target, options):
    """Option `grouping`: GraphTurbo groups, instances, order, binding and scope of the kernels."""
    on = grouping_on(options)
    if on and program.loops:
        # a static loop's kernels run inside the host's loop and carry state between trips:
        # the kernel graph has cycles, which the paper's grouping does not cover
        program.notes.append("grouping: off for this model (it has a static Scan/Loop)")
        on = False
    program.grouping = grouping_of(program, target_budget(target, options)) if on else None
    if program.grouping is not None:
        program.kernels = contiguous(program, program.grouping.groups)
    return program


def contiguous(program, groups):
    """The kernels in a topological order where each group's kernels are consecutive (groups
    are convex, so their graph is acyclic): groups by Kahn's algorithm, the earliest first."""
    kg = kernel_graph(program)
    pos = {k.name: i for i, k in enumerate(program.kernels)}
    of = {n: g.gid for g in groups for n in g.kernels}
    first = {g.gid: min(pos[n] for n in g.kernels) for g in groups}
    before = {g.gid: {of[w] for n in g.kernels for r in kg.reads[n] for w in kg.writers_before(n, r)} - {g.gid}
              for g in groups}
    done, order = set(), []
    while len(order) < len(groups):
        gid = min((x for x in before if x not in done and before[x] <= done), key=first.get)
        done.add(gid)
        order.append(gid)
    by = {g.gid: g for g in groups}
    return [program.kernels[pos[n]] for gid in order for n in sorted(by[gid].kernels, key=pos.get)]


def model_compulsory_bytes(program):
    """Weights + graph inputs + graph outputs, each once: what a model must move at least."""
    roots = set()
    for k in program.kernels:
        for b in k.buffers.values():
            r = program.root(b.tensor)
            if program.graph.tensors[r].data is not None:
                roots.add(r)
    roots |= {program.root(t) for t in list(program.inputs) + list(program.outputs)}
    return sum(tensor_bytes(program, r) for r in sorted(roots))
