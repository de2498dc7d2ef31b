"""Polyhedral passes for C SCoPs (PPCG-style), one module per pass.

    dependences  model in isl, memory-based dependences, isl scheduler
    mapping      outermost parallel band -> CPE kernel, host loops around it
    tiling       tile sizes that fit the LDM budget, the tiled schedule Θ
    copies       LDM buffer groups, copy-in/copy-out sets per tile level

`plan_region` runs them in that order; the Sunway printer turns the result into C.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import islpy as isl

from ...support.errors import LdmError, UnsupportedError
from . import copies, dependences, mapping, tiling


@dataclass
class KernelPlan:
    kernel: mapping.Kernel
    tiling: tiling.Tiling
    groups: list
    levels: list
    theta: object              # isl.UnionMap: statements
    copy_sched: object         # isl.UnionMap: CI<d>/CO<d> copy statements
    cpe_params: list


@dataclass
class RegionPlan:
    region: object
    model: object = None
    deps: object = None
    host: mapping.HostPlan = None
    kernels: list = field(default_factory=list)
    serial: bool = False       # left unchanged on the MPE (--serial-fallback)
    reason: str = ""


def plan_region(region, tc, force=None, serial_fallback=False, kname=lambda k: f"k{k}", warn=None):
    """Plan one region; with serial_fallback, a region outside the model (or that cannot
    fit the LDM) is kept serial instead of raising."""
    warn = warn or (lambda msg: print(f"swbuild: warning: {msg}", file=sys.stderr))
    if region.error is not None:
        if serial_fallback:
            warn(f"{region.error} -- region left serial on the MPE")
            return RegionPlan(region, serial=True, reason=str(region.error))
        raise region.error
    try:
        model = dependences.build_model(region)
        deps = dependences.dependences(model)
        sched = dependences.schedule(model, deps)
        host = mapping.map_kernels(sched, force)
        plan = RegionPlan(region, model, deps, host)
        for k in host.kernels:
            groups = copies.group(k, model)
            t = tiling.choose(k, model, groups, tc, region.arrays, kname(k.index),
                              unsafe=lambda fp, members, g=groups: copies.unsafe_write_backs(fp, model, g, members))
            theta, cpe = tiling.theta(k, t)
            levels, csched = copies.place(k, theta, groups)
            plan.kernels.append(KernelPlan(k, t, groups, levels, theta, csched, cpe))
    except (LdmError, UnsupportedError, isl.Error, AssertionError, AttributeError, TypeError,
            ValueError, KeyError, IndexError) as e:
        if not isinstance(e, (LdmError, UnsupportedError)):
            # a bug here must not print a traceback or produce a wrong region
            e = UnsupportedError(f"{region.path}:{region.start_line}: internal error while planning the "
                                 f"region ({type(e).__name__}: {e}); please report it")
        if not str(e).startswith(f"{region.path}:"):
            e.args = (f"{region.path}:{region.start_line}: {e}",)     # say which region
        if not serial_fallback:
            raise e from None
        warn(f"{e} -- region left serial on the MPE")
        return RegionPlan(region, serial=True, reason=str(e))
    if not plan.kernels:
        # say why nothing goes to the CPEs: the region is kept, on the MPE
        plan.reason = (f"{region.path}:{region.start_line}: no loop of the region can run in parallel "
                       "(every loop carries a dependence): it runs on the MPE")
        warn(plan.reason)
    return plan


def verify(plan):
    """Check a plan against the dependences (for tests and --verify): no dependence between
    instances that may run on different CPEs, each CPE's order Θ respects the rest, and
    every exact copy box fits its LDM buffer. Raises AssertionError naming the kernel."""
    import islpy as isl
    deps = plan.deps.all
    for kp in plan.kernels:
        k, t = kp.kernel, kp.tiling
        dk = deps.intersect_domain(k.domain).intersect_range(k.domain)
        # mapped members: equal at both ends of every dependence
        sched_deps = k.local.reverse().apply_range(dk).apply_range(k.local)
        for d in _maps(sched_deps):
            delta = d.deltas()
            for m in t.members:
                vals = delta.project_out(isl.dim_type.set, m + 1, delta.dim(isl.dim_type.set) - m - 1) \
                    .project_out(isl.dim_type.set, 0, m)
                assert vals.is_subset(isl.Set("{ [0] }").align_params(vals.get_space())), \
                    f"kernel {k.index}: a dependence crosses CPEs along band member {m}"
        th = kp.theta
        dom = th.domain()
        dt = dk.intersect_domain(dom.align_params(dk.get_space())).intersect_range(dom.align_params(dk.get_space()))
        after = th.lex_lt_union_map(th)
        assert dt.is_subset(after), f"kernel {k.index}: the tiled order Θ breaks a dependence"
        for lv in kp.levels:
            for c in lv.copies:
                for q, ext in enumerate(c.group.extents):
                    w = c.hi[q].sub(c.lo[q])
                    too_big = w.ge_set(isl.PwAff.val_on_domain(w.domain(), isl.Val(str(ext))))
                    assert too_big.is_empty(), f"kernel {k.index}: buffer {c.group.array} dim {q} overflows"


def _maps(umap):
    out = []
    umap.foreach_map(out.append)
    return out
