"""Tile searches in worker processes (schedule/parallel.py): the same bytes as searching in
the process itself, the workers really do the searching, SWBUILD_JOBS is checked; and split
decisions persist in the schedule cache."""
import os

import pytest
from onnx import helper

from opt_models import make, rand, sunway

from swbuild.backends.sunway.passes import flat_pixels, trial_seconds, vector_weights, wide_weights
from swbuild.backends.sunway.schedule import ldm, parallel, split
from swbuild.driver.compiler import compile_to
from swbuild.support.errors import SwbuildError


def eight_layer_model():
    """Eight convolutions of distinct shapes (eight distinct searches), two of them long
    reductions with small outputs (split trials)."""
    nodes, inits, c, x = [], [], 4, "x"
    for i, co in enumerate([8, 12, 16, 20, 24, 28, 32, 36]):
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"y{i}"], pads=[1, 1, 1, 1]))
        inits += [(f"w{i}", rand(co, c, 3, 3, seed=2 * i + 1, scale=0.3)), (f"b{i}", rand(co, seed=2 * i + 2))]
        c, x = co, f"y{i}"
    nodes.append(helper.make_node("Conv", [x, "wg", "bg"], ["g"]))
    inits += [("wg", rand(512, c, 1, 1, seed=40, scale=0.1)), ("bg", rand(512, seed=41))]
    nodes.append(helper.make_node("GlobalAveragePool", ["g"], ["p"]))
    nodes.append(helper.make_node("Flatten", ["p"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", "wf", "bf"], ["out"], transB=1))
    inits += [("wf", rand(1000, 512, seed=42, scale=0.05)), ("bf", rand(1000, seed=43))]
    return make(nodes, [("x", [1, 4, 32, 32])], [("out", [1, 1000])], inits)


def _compile(tmp_path, monkeypatch, jobs, tag, model=None, options=None):
    monkeypatch.setenv(parallel.ENV, str(jobs))
    monkeypatch.setattr(ldm, "_MEMO", {})
    monkeypatch.setattr(split, "_DECISIONS", {})
    monkeypatch.setattr(vector_weights, "_DECISIONS", {})     # its trials search tiles too
    monkeypatch.setattr(flat_pixels, "_SECONDS", {})          # and so do these
    monkeypatch.setattr(trial_seconds, "_SECONDS", {})        # and the layouts' trials
    main = os.getpid()
    calls = []
    real = ldm.enumerate_tiles

    def counted(s, cands):              # forked workers inherit this; only ours are recorded
        if os.getpid() == main:
            calls.append(s.k.name)
        return real(s, cands)
    monkeypatch.setattr(ldm, "enumerate_tiles", counted)    # every search (and split trial) builds a table
    program, files = compile_to(model or eight_layer_model(), sunway(), tmp_path / tag, "m", options=options)
    _compile.program = program
    return files, calls


def test_workers_give_the_same_bytes_and_do_the_searching(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "MIN_ITEMS", 2)     # the split pass has two kernels to hand out
    monkeypatch.setattr(parallel, "MIN_WORK", 0.0)    # and its searches are short
    serial, serial_calls = _compile(tmp_path, monkeypatch, 1, "serial")
    serial_layouts, serial_flat = vector_weights._DECISIONS, flat_pixels._SECONDS
    par, par_calls = _compile(tmp_path, monkeypatch, 2, "par")
    assert par == serial
    assert len(serial_layouts) >= 3 and vector_weights._DECISIONS == serial_layouts    # from the workers
    assert len(serial_flat) == 2 and flat_pixels._SECONDS == serial_flat          # the 1x1 layer's two ways
    assert {'m_k7_conv', 'm_k8_conv', 'm_k7_conv_part'} <= set(serial_calls)    # split trials' tables
    assert len(serial_calls) >= 11
    assert par_calls == []              # every search ran in a worker; the passes hit the memo


def test_channel_block_trials_run_in_the_workers(tmp_path, monkeypatch):
    """channel_blocks=on: every layout trial's search runs in a worker, the same bytes."""
    from test_channel_blocks import pointwise_model
    monkeypatch.setattr(parallel, "MIN_ITEMS", 2)     # a small model: few trials per pass
    monkeypatch.setattr(parallel, "MIN_WORK", 0.0)
    opts = {"channel_blocks": "on"}
    # wide_weights' retile re-searches a kernel in this process (not handed to the workers yet): off here
    monkeypatch.setattr(wide_weights, "RESERVES", ())
    serial, serial_calls = _compile(tmp_path, monkeypatch, 1, "serial", pointwise_model(), opts)
    serial_seconds = trial_seconds._SECONDS
    par, par_calls = _compile(tmp_path, monkeypatch, 2, "par", pointwise_model(), opts)
    assert par == serial and _compile.program.target_state.channel_blocks == ["h"]
    assert len(serial_seconds) >= 4 and trial_seconds._SECONDS == serial_seconds      # from the workers
    assert len(serial_calls) >= 4
    assert par_calls == [], par_calls


def test_jobs_setting_is_checked(monkeypatch):
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(parallel.ENV, bad)
        with pytest.raises(SwbuildError, match="SWBUILD_JOBS"):
            parallel.jobs()
    monkeypatch.setenv(parallel.ENV, "3")
    assert parallel.jobs() == 3
    monkeypatch.delenv(parallel.ENV)
    assert parallel.jobs() == min(parallel.cpus(), parallel.MAX_DEFAULT) >= 1


def test_split_decisions_are_cached_so_a_rebuild_runs_no_trials(tmp_path, monkeypatch):
    """The split decisions persist with the tiles: a rebuild on the cache runs no trial."""
    from swbuild.backends.sunway.schedule import cache
    monkeypatch.setenv(parallel.ENV, "1")
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(ldm, "_MEMO", {})
    monkeypatch.setattr(split, "_DECISIONS", {})
    _, cold = compile_to(eight_layer_model(), sunway(), tmp_path / "cold", "m")
    assert split._DECISIONS and all(v >= 1 for v in split._DECISIONS.values())
    monkeypatch.setattr(ldm, "_MEMO", {})
    monkeypatch.setattr(split, "_DECISIONS", {})

    def no_trials(*a):
        raise AssertionError("split trials ran despite a cached decision")
    monkeypatch.setattr(split, "_trials", no_trials)
    _, warm = compile_to(eight_layer_model(), sunway(), tmp_path / "warm", "m")
    assert warm == cold


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_ctrl_c_stops_the_workers_at_once(monkeypatch):
    """An interrupt while workers search raises at once, leaves no worker behind and no
    error in the pool's manager thread."""
    import signal
    import time

    monkeypatch.setenv(parallel.ENV, "2")

    def forever(item):
        time.sleep(600)

    def interrupt(*a):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            parallel.prefetch(forever, list(range(parallel.MIN_ITEMS)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while _children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children() == []


def _children():
    """Live (not zombie) child processes of this process, from /proc."""
    me, out = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == me and stat[0] != "Z":
                out.append(int(d))
    return out


def test_default_workers_follow_the_cgroup_cpu_quota(tmp_path, monkeypatch):
    """A container limited to 1.5 CPUs gets 2 workers at most, whatever its affinity says."""
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert parallel.cpus(str(v2)) == min(2, len(os.sched_getaffinity(0)))
    (v2 / "cpu.max").write_text("max 100000\n")
    assert parallel.cpus(str(v2)) == len(os.sched_getaffinity(0))
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert parallel.cpus(str(tmp_path / "v1")) == 1
    assert parallel.cpus(str(tmp_path / "none")) == len(os.sched_getaffinity(0))


def test_little_work_stays_in_the_process(monkeypatch):
    """Searches estimated at less than MIN_WORK seconds in all are not handed to workers (the
    forks would cost more CPU than they save): prefetch returns at once."""
    import time
    monkeypatch.setenv(parallel.ENV, "2")

    def forever(item):
        time.sleep(600)
    t0 = time.monotonic()
    items = list(range(parallel.MIN_ITEMS))
    parallel.prefetch(forever, items, work=lambda it: parallel.MIN_WORK / (2 * len(items)))
    assert time.monotonic() - t0 < 5 and _children() == []
