"""`swbuild calibrate --target T --ingest results.json`: fit the cost model's numbers to what
the calibration programs (calibrate.py) measured, and write a site toolchain file.

The fits use the cost model's own forms (backends/sunway/cost/model.py, the DianNao cycle
table of toolchains/diannao.toml), so numbers measured under emulation give back the
emulator's: Sunway DMA bandwidth = cpes * bytes / time per block size (the `dma_curve`
table, one point per size measured; `peak * s / (s + half)` fitted above 64 B), barriers,
register messages and spawn in cycles per operation, multiply-add rates; DianNao `__memcpy`
as start-up + bytes x cycles per byte by direction, `__bang_conv` as start-up + MACs / rate,
barriers and launches per operation.

A number the measurements cannot give (a loop whose cycles did not move: the emulators model
no Sunway compute) is not fitted, and the report says why; the file keeps its value.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..support.errors import SwbuildError

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

FORMAT = "swbuild-calibrate-results"
# Sunway measurement kinds -> the keys each needs (besides "kind")
SUNWAY_KEYS = {"dma": ("dir", "bytes", "ops", "cpes", "cycles"), "dma_strided": ("dir", "bytes", "bsize", "ops", "cycles"),
               "bcast": ("width", "bytes", "ops", "cycles"), "sync": ("width", "ops", "cycles"),
               "regcomm": ("round_trips", "cycles"), "spawn": ("ops", "cycles"),
               "fma_simd": ("fma", "cycles"), "fma_scalar": ("fma", "cycles")}
DIANNAO_KEYS = {"memcpy": ("dir", "bytes", "segments", "ops", "time", "empty_launch"),
                "conv": ("macs", "ops", "time"), "sync": ("scope", "ops", "time"), "launch": ("ops", "time")}
GDRAM_DIRS = ("GDRAM2NRAM", "NRAM2GDRAM", "GDRAM2WRAM", "WRAM2GDRAM", "GDRAM2SRAM", "SRAM2GDRAM")
SRAM_DIRS = ("NRAM2SRAM", "SRAM2NRAM", "SRAM2WRAM", "WRAM2SRAM", "SRAM2SRAM")
NRAM_DIRS = ("NRAM2NRAM", "NRAM2WRAM", "WRAM2NRAM")


@dataclass
class Fit:
    values: dict = field(default_factory=dict)     # toolchain key -> fitted number
    not_fitted: dict = field(default_factory=dict)  # toolchain key -> why
    notes: list = field(default_factory=list)       # what else was measured


# ---- reading -------------------------------------------------------------------------

def load_results(path, tc):
    """The measurements of a results.json, by kind; SwbuildError naming file and key."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise SwbuildError(f"{path}: no such results file (make run writes results.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SwbuildError(f"{path}: not JSON: {e} (a calibration program failed half way? run make run again)") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SwbuildError(f"{path}: format: expected \"{FORMAT}\" (the results.json of a calibration archive)")
    if doc.get("target") != tc.name:
        raise SwbuildError(f"{path}: target: the results are of '{doc.get('target')}', not of '{tc.name}'")
    progs = doc.get("programs")
    if not isinstance(progs, list) or not progs:
        raise SwbuildError(f"{path}: programs: expected a non-empty list")
    kinds = {"sunway": SUNWAY_KEYS, "diannao": DIANNAO_KEYS}[tc.family]
    out = {}
    for i, p in enumerate(progs):
        where = f"programs[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("measurements"), list):
            raise SwbuildError(f"{path}: {where}.measurements: expected a list")
        unit = p.get("unit", "cycles")
        if unit not in ("cycles", "seconds"):
            raise SwbuildError(f"{path}: {where}.unit: expected cycles or seconds, not {unit!r}")
        for j, m in enumerate(p["measurements"]):
            at = f"{where}.measurements[{j}]"
            if not isinstance(m, dict) or m.get("kind") not in kinds:
                raise SwbuildError(f"{path}: {at}.kind: expected one of {', '.join(sorted(kinds))}")
            for k in kinds[m["kind"]]:
                if k not in m:
                    raise SwbuildError(f"{path}: {at}: missing key '{k}'")
                v = m[k]
                if k not in ("dir", "scope") and (isinstance(v, bool) or not isinstance(v, (int, float))
                                                  or not math.isfinite(v) or v < 0):
                    raise SwbuildError(f"{path}: {at}.{k}: expected a number >= 0, not {v!r}")
            for k in ("ops", "round_trips", "fma", "bytes", "macs"):
                if k in m and m[k] <= 0:
                    raise SwbuildError(f"{path}: {at}.{k}: must be positive")
            rec = dict(m, _at=at)
            if unit == "seconds":           # the machine's timer: into cycles of the file's clock
                for k in ("time", "empty_launch"):
                    if k in rec:
                        rec[k] = rec[k] * float(tc.hardware["clock_hz"])
            out.setdefault(m["kind"], []).append(rec)
    return out


# ---- fits ----------------------------------------------------------------------------

def _line(xs, ys):
    """Least-squares intercept and slope of ys over xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def fit_saturation(points):
    """peak, half of bw = peak * s / (s + half) minimising the relative error (a scan of
    half over a log grid, peak in closed form for each)."""
    best = None
    for i in range(0, 1201):
        half = 10 ** (i / 200)                  # 1 .. 10^6 bytes
        g = [s / (s + half) / b for s, b in points]
        peak = sum(g) / sum(x * x for x in g)   # min sum (peak * g - 1)^2
        err = sum((peak * x - 1) ** 2 for x in g)
        if best is None or err < best[0]:
            best = (err, peak, half)
    return best[1], best[2]


def _need(fit, meas, kind, key, why):
    if not meas.get(kind):
        fit.not_fitted[key] = why
        return False
    return True


def _mean_per_op(fit, ms, key, why, field):
    """`key` = the mean of `field` per operation over the measurements `ms`, or not fitted (why)."""
    if ms:
        fit.values[key] = sum(m[field] / m["ops"] for m in ms) / len(ms)
    else:
        fit.not_fitted[key] = why


def fit_sunway(tc, meas) -> Fit:
    hw, fit = tc.hardware, Fit()
    clock = float(hw["clock_hz"])
    cpes = int(hw["cpes"])
    if _need(fit, meas, "dma", "dma_curve", "no contiguous DMA measurements"):
        by_size = {}
        for m in meas["dma"]:               # gets and puts of a size: the mean time
            by_size.setdefault(int(m["bytes"]), []).append(m["cycles"] / m["ops"])
        curve = []
        for s, cyc in sorted(by_size.items()):
            t = sum(cyc) / len(cyc) / clock
            if t <= 0:
                raise SwbuildError(f"DMA of {s} bytes took 0 cycles: the cycle counter did not move")
            curve.append((s, cpes * s / t))
        fit.values["dma_curve"] = [[s, b] for s, b in curve]
        big = [(s, b) for s, b in curve if s >= 64]
        if len(big) >= 2:
            peak, half = fit_saturation(big)
            fit.values["dma_fit_peak_bytes_per_s"] = peak
            fit.values["dma_fit_half_bytes"] = half
            fit.values["roofline_bytes_per_s"] = peak
    for m in meas.get("dma_strided", []):
        per = m["cycles"] / m["ops"] / clock
        fit.notes.append(f"strided {m['dir']} of {m['bytes']} B in {m['bsize']}-B blocks: "
                         f"{cpes * m['bytes'] / per / 1e9:.3g} GB/s")
    for m in meas.get("bcast", []):
        fit.notes.append(f"broadcast to {m['width']} CPEs of {m['bytes']} B (+ barrier): "
                         f"{m['cycles'] / m['ops']:.0f} cycles")
    for width, key in ((8, "row_sync_cycles"), (64, "array_sync_cycles")):
        _mean_per_op(fit, [m for m in meas.get("sync", []) if m["width"] == width], key,
                     f"no barrier measurements of {width} CPEs", "cycles")
    if _need(fit, meas, "regcomm", "regcomm_latency_cycles", "no register messages measured (CRTS has none)"):
        # half a round trip is one put's issue plus its latency: the file's per-message cost is kept
        fit.values["regcomm_latency_cycles"] = sum(m["cycles"] / (2 * m["round_trips"]) for m in meas["regcomm"]) \
            / len(meas["regcomm"]) - float(hw.get("regcomm_message_cycles", 0.0))
        fit.not_fitted["regcomm_message_cycles"] = "the ping-pong measures a put's issue plus its latency together"
    _mean_per_op(fit, meas.get("spawn"), "spawn_seconds", "no spawn measurements", "cycles")
    if "spawn_seconds" in fit.values:
        fit.values["spawn_seconds"] /= clock
    for kind, key in (("fma_simd", "fma_per_cycle_simd"), ("fma_scalar", "fma_per_cycle_scalar")):
        ms = meas.get(kind, [])
        if not ms:
            fit.not_fitted[key] = "no measurements"
        elif any(m["cycles"] == 0 for m in ms):
            fit.not_fitted[key] = "its loop took 0 cycles: the cycle counter does not count compute (the emulator models none)"
        else:
            fit.values[key] = sum(m["fma"] / m["cycles"] for m in ms) / len(ms)
    return fit


def fit_diannao(tc, meas) -> Fit:
    hw, fit = tc.hardware, Fit()
    lines = {}
    plain = [m for m in meas.get("memcpy", []) if m["segments"] == 1]
    for d in sorted({m["dir"] for m in plain}):
        ms = [m for m in plain if m["dir"] == d]
        if len({m["bytes"] for m in ms}) < 2:
            raise SwbuildError(f"{ms[0]['_at']}: __memcpy {d} measured at one size only: need two to fit")
        lines[d] = _line([m["bytes"] for m in ms], [(m["time"] - m["empty_launch"]) / m["ops"] for m in ms])
        fit.notes.append(f"__memcpy {d}: {lines[d][0]:.1f} cycles + {lines[d][1]:.4g} cycles/B")
    if lines:
        fit.values["memcpy_startup_cycles"] = sum(a for a, _ in lines.values()) / len(lines)
    else:
        fit.not_fitted["memcpy_startup_cycles"] = "no __memcpy measurements"
    granule = float(hw["gdram_granule_bytes"])
    for dirs, key, conv in ((GDRAM_DIRS, "gdram_cycles_per_granule", lambda s: s * granule),
                            (SRAM_DIRS, "sram_bytes_per_cycle", lambda s: 1 / s),
                            (NRAM_DIRS, "nram_bytes_per_cycle", lambda s: 1 / s)):
        slopes = [lines[d][1] for d in dirs if d in lines]
        if slopes and sum(slopes) > 0:
            fit.values[key] = conv(sum(slopes) / len(slopes))
        else:
            fit.not_fitted[key] = f"no __memcpy measurements of {', '.join(dirs)}"
    seg = [m for m in meas.get("memcpy", []) if m["segments"] > 1]
    if seg and "gdram_cycles_per_granule" in fit.values:
        cpg, start = fit.values["gdram_cycles_per_granule"], fit.values["memcpy_startup_cycles"]
        per = [((m["time"] - m["empty_launch"]) / m["ops"] - start - m["segments"] * m["bytes"] / granule * cpg)
               / (m["segments"] - 1) for m in seg]
        fit.values["strided_segment_cycles"] = sum(per) / len(per)
    else:
        fit.not_fitted["strided_segment_cycles"] = "no strided GDRAM __memcpy measurements"
    conv = meas.get("conv", [])
    if len({m["macs"] for m in conv}) >= 2:
        a, b = _line([m["macs"] for m in conv], [m["time"] / m["ops"] for m in conv])
        fit.values["conv_startup_cycles"] = a
        if b > 0:
            fit.values["conv_float_macs_per_cycle"] = 1 / b
    else:
        fit.not_fitted["conv_startup_cycles"] = "need __bang_conv measured at two sizes"
    for scope, key in (("cluster", "sync_cluster_cycles"), ("all", "sync_all_cycles")):
        _mean_per_op(fit, [m for m in meas.get("sync", []) if m["scope"] == scope], key,
                     f"no __sync_{scope} measurements", "time")
    _mean_per_op(fit, meas.get("launch"), "launch_cycles", "no launch measurements", "time")
    return fit


def fit(tc, results_path) -> Fit:
    meas = load_results(results_path, tc)
    return {"sunway": fit_sunway, "diannao": fit_diannao}[tc.family](tc, meas)


# ---- the site toolchain file ---------------------------------------------------------

def _num(v, like):
    """A TOML number: an integer where the shipped value is one, else 4 significant digits."""
    if isinstance(like, int) and not isinstance(like, bool):
        return str(int(round(v)))
    text = f"{float(v):.4g}"
    return text if any(c in text for c in ".en") else text + ".0"


def _value(key, v, hw):
    if key == "dma_curve":
        return "[" + ", ".join(f"[{int(s)}, {_num(b, 1.0)}]" for s, b in v) + "]"
    return _num(v, hw.get(key, 1.0))


def today():
    """The date stamped on measured numbers: SOURCE_DATE_EPOCH when set (reproducible builds), else today (UTC)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else \
        datetime.datetime.now(datetime.timezone.utc)
    return when.date().isoformat()


def site_text(tc, f: Fit, date, results_name) -> str:
    """The target's own file with each fitted key of [hardware] replaced (or added) and
    marked measured; every other line as it was."""
    mark = f"# measured by swbuild calibrate on {date}"
    lines = tc.path.read_text().splitlines()
    section, done, hw_end = None, set(), None
    for i, ln in enumerate(lines):
        head = re.match(r"\s*\[([^\]]+)\]\s*(#.*)?$", ln)
        if head:
            section = head.group(1).strip()
            continue
        m = re.match(r"(\s*)([A-Za-z0-9_]+)(\s*)=", ln)
        if section == "hardware":
            hw_end = i
            if m and m.group(2) in f.values:
                k = m.group(2)
                if ln.count("[") != ln.count("]"):
                    raise SwbuildError(f"{tc.path}:{i + 1}: {k}: a value over several lines cannot be replaced")
                lines[i] = f"{m.group(1)}{k}{m.group(3)}= {_value(k, f.values[k], tc.hardware)}   {mark}"
                done.add(k)
    added = [f"{k} = {_value(k, f.values[k], tc.hardware)}   {mark}" for k in f.values if k not in done]
    if added and hw_end is None:
        lines += ["", "[hardware]", "# Numbers measured on this site; the rest come from the file this one emulates."] + added
    elif added:
        lines[hw_end + 1:hw_end + 1] = added
    head = [f"# Site toolchain file: {tc.name} with numbers measured by `swbuild calibrate` on {date}",
            f"# from {results_name} (the lines marked measured); in a project's toolchains/ it overrides",
            "# the shipped file of the same name."]
    return "\n".join(head + lines) + "\n"


def write_site_file(tc, f: Fit, out_dir, results_name, date=None):
    """Write <out_dir>/<target>.toml; returns its path. The text is checked by reading it back."""
    text = site_text(tc, f, date or today(), results_name)
    try:
        back = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SwbuildError(f"the site toolchain file for {tc.name} would not parse: {e} (a bug: please report it)") from None
    for k in f.values:
        if k not in back.get("hardware", {}):
            raise SwbuildError(f"the site toolchain file for {tc.name} lost {k} (a bug: please report it)")
    out = Path(out_dir) / f"{tc.name}.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return out
