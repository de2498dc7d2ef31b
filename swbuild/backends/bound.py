"""The physical bound of a whole model on a target, for the reports of every family: what no
schedule can beat, max(the model's flops at the machine's peak, its compulsory bytes (weights
+ graph inputs + graph outputs, each once) at the memory bandwidth). `bound_ratio` is how far
the modelled time is from it (1.0 = at the bound). Each family passes its own peak and
bandwidth, read from its toolchain file."""
from __future__ import annotations

from .table import ms


def physical_bound_seconds(flops, compulsory_bytes, peak_flops, bandwidth, compute_seconds=None):
    """compute_seconds: the flops already timed at their own roofs (a model whose kernels run at
    different peaks, e.g. int8 convolutions beside float ones); else flops / peak_flops."""
    compute = compute_seconds if compute_seconds is not None else flops / peak_flops if peak_flops else 0.0
    memory = compulsory_bytes / bandwidth if bandwidth else 0.0
    return max(compute, memory)


def bound_fields(flops, compulsory_bytes, peak_flops, bandwidth, modeled_seconds, compute_seconds=None):
    """The report's keys: the bound, which roof sets it, and modelled / bound."""
    bound = physical_bound_seconds(flops, compulsory_bytes, peak_flops, bandwidth, compute_seconds)
    compute = compute_seconds if compute_seconds is not None else flops / peak_flops if peak_flops else 0.0
    return {"physical_bound_seconds": bound,
            "physical_bound_limit": "compute" if bound and compute >= bound else "memory",
            "bound_ratio": modeled_seconds / bound if bound else 0.0}


def bound_line(rep):
    """The report table's line for the bound (nothing when the report has none)."""
    bound = rep.get("physical_bound_seconds")
    if not bound:
        return []
    return [f"physical bound {ms(bound)} ms ({rep['physical_bound_limit']}: max of {rep['flops'] / 1e9:.3g} GFLOP at "
            f"peak, {rep.get('model_compulsory_bytes', 0) / 1e6:.2f} MB compulsory at memory bandwidth); "
            f"modelled {ms(rep['modeled_seconds'])} ms = {rep['bound_ratio']:.2f}x the bound"]
