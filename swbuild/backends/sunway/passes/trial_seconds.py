"""A kernel's modelled seconds as the build would model it: the kernel alone through the
scheduling passes, then the predictor. The layout passes (channel_blocks, flat_pixels,
vector_weights) compare a kernel's variants by these seconds.

Repeated layers (the same kernel but for names, ldm.signature) model the same seconds: the
passes depend on nothing else, and the signature holds the hardware, the LDM budget and the
options' flags the passes read. So the seconds are memoised by signature, and the parallel
tile search's workers (schedule/parallel.py) fill the memo for the misses a pass hands them.
"""
from __future__ import annotations

from dataclasses import replace

from ..cost import model
from ..cost.predict import simulate
from ..schedule import parallel
from ..schedule.ldm import Search, ldm_budget, search_tiles, signature
from .wide_weights import widest
from ..schedule.passes import Draft, SunwayState, schedule_drafted

_SECONDS = {}       # ("trial",) + a kernel's search signature -> its modelled seconds
parallel.MEMOS.append(lambda: _SECONDS)        # workers send them back with the tiles


class KernelSeconds:
    """Modelled seconds of kernels of `program` (or variants of them) for target and options."""

    def __init__(self, program, target, options):
        self.p, self.target, self.options = program, target, options

    def search(self, k):
        """The tile search of k as a trial runs it, and its key in _SECONDS."""
        s = Search(k, self.target.hardware, ldm_budget(self.target, self.options), self.options, self.p.graph,
                   self.target.sha256)
        return s, ("trial",) + signature(s)

    def _seconds(self, k):
        trial = replace(k, buffers=dict(k.buffers), schedule=None)     # the passes re-point its buffers
        mini = replace(self.p, kernels=[trial], notes=[], target_state=SunwayState())
        s, key = self.search(trial)
        if key not in _SECONDS:
            _SECONDS[key] = self._run_passes(trial, mini, s)
        return _SECONDS[key]

    def _run_passes(self, trial, mini, s):
        mini.target_state.drafts[trial.name] = Draft(s, tiles=search_tiles(s))
        schedule_drafted(mini, self.target, self.options)
        hw = self.target.hardware
        trial = widest(trial, self.target, self.options)    # as the pipeline's wide_weights does next
        r = simulate(trial, self.target.cores, 8 * len(trial.buffers), hw)
        return model.kernel_seconds(hw, r["cpe_seconds"])
