"""Tile searches on every core.

The searches of different kernels are independent and each is a pure function of the
kernel's canonical form (ldm.signature). Before a pass searches its kernels one by one, it
hands the kernels that would miss the search memo and the persistent cache to `prefetch`:
worker processes (forked, so they share the program without pickling it) run the same
searches and send back the memo entries they made, in the order of the kernels. The pass then
runs exactly as before and finds every result in the memos (tiles, split decisions), so the
output is the same bytes with one worker or many.

    SWBUILD_JOBS=N     N workers (1: none, search in the process itself)
    (unset)            one per CPU this process may use (affinity and cgroup quota), at most 8

Fewer than MIN_ITEMS searches, or searches estimated at less than MIN_WORK seconds in all,
stay in the process (forks and their start-up cost more CPU than they save wall time: about
0.1 s against half the work). A worker that fails leaves its kernels to the pass, which then
searches them itself and reports any error as it would without workers.
"""
from __future__ import annotations

import gc
import os
import signal

from ....support.errors import SwbuildError
from . import ldm

ENV = "SWBUILD_JOBS"
MIN_ITEMS = 6
MIN_WORK = 0.5      # estimated seconds of searching (the caller's `work`) worth forking for
MAX_DEFAULT = 8     # searches are many and short: more workers mostly add fork cost

_WORK = None        # (fn, items) while a pool runs: the forked workers inherit it


def jobs():
    """Worker processes to use: $SWBUILD_JOBS, or the CPUs this process may use (at most
    MAX_DEFAULT)."""
    v = os.environ.get(ENV, "").strip()
    if not v:
        return min(cpus(), MAX_DEFAULT)
    if not v.isdigit() or int(v) < 1:
        raise SwbuildError(f"{ENV}={v!r}: expected a whole number of worker processes, 1 or more")
    return int(v)


def cpus(cgroup="/sys/fs/cgroup"):
    """CPUs this process may use: its affinity, bounded by a cgroup CPU quota (a container
    limited to 2 CPUs on a 64-core host sees 64 in its affinity)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _quota(cgroup)
    return n if quota is None else min(n, quota)


def _quota(cgroup):
    """The cgroup's CPU quota in whole CPUs (rounded up), or None without one."""
    def read(name):
        with open(os.path.join(cgroup, name)) as f:
            return f.read().split()
    for parts in (lambda: read("cpu.max")[:2],                                            # cgroup v2
                  lambda: read("cpu/cpu.cfs_quota_us") + read("cpu/cpu.cfs_period_us")):  # cgroup v1
        try:
            quota, period = parts()
        except (OSError, ValueError):
            continue
        if quota in ("max", "-1") or not quota.isdigit() or not period.isdigit() or int(period) == 0:
            return None
        return max(1, -(-int(quota) // int(period)))
    return None


def distinct_misses(items, key, known):
    """The work to hand out: of the items with the same key the first, unless `known(item)`
    (a memo or cache lookup) already gives its result."""
    todo, seen = [], set()
    for it in items:
        k = key(it)
        if k not in seen and known(it) is None:
            todo.append(it)
        seen.add(k)
    return todo


MEMOS = [lambda: ldm._MEMO]     # the memos the work fills, as getters; split.py adds its decisions


def _memos():
    return [get() for get in MEMOS]


def prefetch_trials(decide, trials, memo, work):
    """decide(trial) in the workers for the trials (each with a `key`) that `memo`, a pass's
    decisions registered in MEMOS, does not hold yet."""
    prefetch(decide, distinct_misses(trials, lambda t: t.key, lambda t: memo.get(t.key)), work)


def _run(i):
    fn, items = _WORK
    before = [set(m) for m in _memos()]
    try:
        fn(items[i])
    except Exception:           # noqa: BLE001 -- the pass redoes this item and reports it
        return [[] for _ in before]
    return [[(k, v) for k, v in m.items() if k not in b] for m, b in zip(_memos(), before)]


def prefetch(fn, items, work=None):
    """Run fn(item) for every item in worker processes, for the memo entries it makes.
    `work(item)`: its estimated seconds, when the caller can tell."""
    n = min(jobs(), len(items))
    if n < 2 or len(items) < MIN_ITEMS or (work is not None and sum(work(it) for it in items) < MIN_WORK):
        return
    import multiprocessing          # here: most builds never fork, and these imports cost 15 ms
    from concurrent.futures import ProcessPoolExecutor
    if "fork" not in multiprocessing.get_all_start_methods():
        return
    global _WORK
    _WORK = (fn, items)
    ex = None
    gc.freeze()     # the workers' collector leaves the parent's objects alone (no copy-on-write of their pages)
    try:
        ex = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"), initializer=_quiet)
        # futures, not ex.map: map cancels what is pending when interrupted, and Python 3.11's
        # pool then raises in its manager thread marking those futures broken
        futures = [ex.submit(_run, i) for i in range(len(items))]
        for f in futures:
            deltas = f.result()
            for memo, entries in zip(_memos(), deltas):
                for k, v in entries:
                    memo.setdefault(k, v)
        ex.shutdown()
    except (OSError, RuntimeError):   # no processes here (a sandbox, a limit): search in-process
        _stop(ex)
    except BaseException:             # Ctrl-C, an error: the workers go at once, not after their queue
        _stop(ex)
        raise
    finally:
        _WORK = None
        gc.unfreeze()


def _quiet():
    """Workers leave Ctrl-C to the parent, which stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(ex):
    if ex is None:
        return
    for p in list((getattr(ex, "_processes", None) or {}).values()):
        p.terminate()
    ex.shutdown(wait=False)     # not cancel_futures: see prefetch
