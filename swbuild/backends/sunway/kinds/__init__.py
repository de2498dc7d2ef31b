"""Special kernel kinds: kernels the Sunway backend schedules, prints and predicts by hand
instead of through the tile search (run-time Gather, dtype conversion, RNN recurrences).

Each kind's module holds all three: `<kind>_schedule` (fixed LDM buffers, checked against the
budget), `<kind>_c` (the CPE function, called by emit/slave.py) and `<kind>_predict` (its exact
DMA counts). The schedule object a kind leaves on the kernel answers `predict(k, cores,
para_bytes)`, so cost/predict.py needs no import from here.
"""
from __future__ import annotations

from ..schedule.ldm import ldm_budget
from .convert import convert_schedule
from .gather import gather_schedule
from .recurrence import recurrence_schedule

SCHEDULERS = {"gather": gather_schedule, "convert": convert_schedule, "recurrence": recurrence_schedule}   # kernel kind -> fn(kernel, hw, budget, options)


def schedule_special_kernels(program, target, options):
    """Kernels printed by their own module (run-time Gather): check their fixed LDM buffers."""
    budget = ldm_budget(target, options)
    for k in program.kernels:
        fn = SCHEDULERS.get(k.kind)
        if fn is not None:
            fn(k, target.hardware, budget, options)
    return program
