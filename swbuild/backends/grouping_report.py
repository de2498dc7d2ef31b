"""Option `grouping` in every family's report: per group its kernels, split and binding as the
plan recorded them, the launches that realised it, the table's lines and the plot's bands."""
from __future__ import annotations

from .table import mb

# Point size of the plots' bar labels: legible at the 120 dpi they are saved at (5 pt was ~8 px)
LABEL_POINTS = 8


def grouping_summary(plan, note):
    """The plan's grouping with, per group, the launches its kernels ran in (a grouped launch,
    `op: "Group"`, names its kernels in `fused`; every other kernel is its own launch), and
    `note`: what the family's launches do and do not do."""
    g = plan.get("grouping")
    if g is None:
        return None
    launch_of = {}
    for k in plan["kernels"]:
        for n in (k["fused"] if k.get("op") == "Group" else [k["name"]]):
            launch_of[n] = k["name"]
    for st in g.get("stitched", []):      # a stitched producer ran inside its consumer
        launch_of[st["producer"]] = launch_of.get(st["consumer"], st["consumer"])
    groups = [dict(grp, launches=sorted({launch_of.get(n, n) for n in grp["kernels"]})) for grp in g["groups"]]
    return dict(g, groups=groups, realised="launches", note=note)


def _cores(ids):
    """Core ids as runs: [0, 1, 2, 5] -> '0-2,5'."""
    runs, ids = [], sorted(set(ids))
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def traffic_line(rep):
    """Model-level traffic: what moved against weights + graph inputs + graph outputs once."""
    comp = rep.get("model_compulsory_bytes")
    if not comp:
        return []
    return [f"model-level traffic {mb(rep['main_memory_bytes'])} MB = {rep['model_traffic_ratio']:.2f}x of "
            f"weights + inputs + outputs once ({mb(comp)} MB); {rep['kernel_launches']} launches"]


def grouping_lines(rep):
    """The report table's grouping section: a line for the whole, then one per group."""
    g = rep.get("grouping")
    if not g:
        return []
    comp = rep.get("model_compulsory_bytes") or 0
    plan = g["planned_main_memory_bytes"]
    lines = [f"grouping: {len(g['groups'])} groups, {g['instances']} instances ({g['order']} order), "
             f"realised as {g['realised']}; the plan's own traffic if stitched {mb(plan)} MB"
             + (f" = {plan / comp:.2f}x" if comp else ""), f"  ({g['note']})"]
    pre = rep["model"] + "_"
    st = g.get("stitched") or []
    if st:
        pairs = [f"{x['producer'].removeprefix(pre)} -> {x['consumer'].removeprefix(pre)}" for x in st]
        lines.append(f"  {len(st)} producer{'s' if len(st) != 1 else ''} recomputed in the consumer's local memory: "
                     + ", ".join(pairs[:6]) + (f", ... ({len(pairs) - 6} more)" if len(pairs) > 6 else ""))
    for grp in g["groups"]:
        names = [n.removeprefix(pre) for n in grp["kernels"]]
        layers = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} kernels)"
        sp = grp["split"]
        lines.append(f"  g{grp['group']}: {layers}; split {sp['axis']}/{sp['factor']}"
                     f"{'' if sp['fits'] else ' (does not fit)'}; {len(grp['binding'])} instance"
                     f"{'s' if len(grp['binding']) != 1 else ''} bound to {_cores(grp['binding'])}; "
                     f"{len(grp['launches'])} launch{'es' if len(grp['launches']) != 1 else ''}")
    return lines


def shade_groups(ax, rep, bars):
    """A band behind each group's bars (`bars`: per bar, in order, the names of the kernels it
    stands for: one, or a grouped launch's), labelled with the group's id and split."""
    g = rep.get("grouping")
    if not g:
        return
    pos = {n: i for i, names in enumerate(bars) for n in names}
    for grp in g["groups"]:
        xs = [pos[n] for n in grp["kernels"] if n in pos]
        if not xs:
            continue
        ax.axvspan(min(xs) - 0.45, max(xs) + 0.45, color="C%d" % (grp["group"] % 10), alpha=0.12, lw=0)
        sp = grp["split"]
        ax.text((min(xs) + max(xs)) / 2, ax.get_ylim()[1] * 0.97, f"g{grp['group']} {sp['axis']}/{sp['factor']}",
                ha="center", va="top", fontsize=LABEL_POINTS - 1, rotation=90)
