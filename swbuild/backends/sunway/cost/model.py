"""The Sunway cost model. Every number comes from the target description (toolchains/*.toml).

* DMA: a transfer of `s` contiguous bytes moves at the core group's measured bandwidth for
  blocks of that size (`dma_curve`, swCandle's STREAM copy with 64 CPEs, interpolated in
  log(size); above its last point the fitted law `peak * s / (s + half)`). That bandwidth is
  shared by the 64 CPEs, so one CPE moves `bw(s) / cpes` bytes per second.
* Compute: what the generated inner loops execute, per iteration: floating-point/vector
  operations at `fma_per_cycle_simd` / `fma_per_cycle_scalar`, LDM loads and stores at
  `ldm_loads_per_cycle` (an unaligned vector load costs `simd_unaligned_load_cost`), plus
  `loop_overhead_cycles` of integer work. With `dual_issue` the floating-point pipeline and
  the memory/integer pipeline issue in the same cycle (SW26010 CPEs have two pipelines), so
  an iteration takes the larger of the two; without it, their sum. Divisions and
  transcendental functions cost `div_cycles` / `transcendental_cycles`; pow is exp and log,
  except pow(a, 0.75), printed as two square roots and a product (cexpr.POW_HELPERS).
* A kernel: `spawn_seconds` plus the busiest CPE; a CPE whose boxes are double-buffered
  overlaps DMA with compute: max of the two plus the part `1 - dma_overlap` of the shorter
  one that double buffering does not hide, plus the first fetch and the last write that
  cannot overlap; otherwise DMA and compute add up.
* Row sharing (schedule/grid.py): a box one broadcast DMA brings to the 8 CPEs of a
  mesh row costs each of them 1/8 of its bytes at the core group's bandwidth (the memory
  side reads it once), and each such fetch costs `row_sync_cycles` per row barrier (one
  when double-buffered, two otherwise). Array sharing (`array_broadcast`): the same for all
  64 CPEs, 1/64 of the bytes each and `array_sync_cycles` per array barrier.
* Roofline: max(flops / (peak_flops_per_cpe * cpes), compulsory bytes / roof bandwidth),
  the roof bandwidth being `roofline_bytes_per_s` (the DMA bandwidth CPEs can attain; the
  theoretical `mem_bandwidth_bytes_per_s` when absent). Compulsory bytes: every tensor region
  a kernel reads, once, and its output, once.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ....ir.loopnest import Bin, Const, Select, Un, children
from ...cexpr import POW_HELPERS

TRANSCENDENTAL = {"exp", "log", "tanh", "erf", "sigmoid", "sin", "cos", "tan", "asin", "acos", "atan",
                  "sinh", "cosh", "asinh", "acosh", "atanh"}
DEFAULTS = {"dual_issue": True, "simd_unaligned_load_cost": 2, "loop_overhead_cycles": 1,
            "div_cycles": 10, "transcendental_cycles": 30, "vector_registers": 32,
            "fma_per_cycle_simd": 1, "fma_per_cycle_scalar": 1, "ldm_loads_per_cycle": 1,
            "spawn_seconds": 10e-6, "dma_overlap": 1.0, "row_broadcast": False, "row_sync_cycles": 100,
            "array_broadcast": False, "array_sync_cycles": 200, "rma_broadcast": False}


def hwget(hw, key):
    return hw.get(key, DEFAULTS.get(key))


_CURVES = {}


def _bw_scalar(hw, s):
    key = id(hw)
    hit = _CURVES.get(key)
    if hit is None or hit[0] is not hw:
        hit = _CURVES[key] = (hw, sorted(hw["dma_curve"]))
    curve = hit[1]
    s = max(float(s), 1.0)
    if s <= curve[0][0]:
        return curve[0][1] * s / curve[0][0]
    if s >= curve[-1][0]:
        peak, half = float(hw["dma_fit_peak_bytes_per_s"]), float(hw["dma_fit_half_bytes"])
        return max(float(curve[-1][1]), peak * s / (s + half))
    sizes = [c[0] for c in curve]
    i = bisect.bisect_right(sizes, s)
    (s0, b0), (s1, b1) = curve[i - 1], curve[i]
    f = (math.log(s) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return b0 + f * (b1 - b0)


def dma_bandwidth(hw, block_bytes):
    """Core-group DMA bandwidth (bytes/s) for contiguous blocks of `block_bytes` (scalar or array)."""
    if not isinstance(block_bytes, np.ndarray):
        return _bw_scalar(hw, block_bytes)
    curve = sorted(hw["dma_curve"])
    sizes = np.log([float(c[0]) for c in curve])
    bws = np.array([float(c[1]) for c in curve])
    s = np.maximum(np.asarray(block_bytes, dtype=float), 1.0)
    peak, half = float(hw["dma_fit_peak_bytes_per_s"]), float(hw["dma_fit_half_bytes"])
    mid = np.interp(np.log(s), sizes, bws)
    low = bws[0] * s / float(curve[0][0])
    high = np.maximum(bws[-1], peak * s / (s + half))
    out = np.where(s <= curve[0][0], low, np.where(s >= curve[-1][0], high, mid))
    return float(out) if np.ndim(out) == 0 else out


def max_dma_bandwidth(hw):
    """The supremum of dma_bandwidth over block sizes: no modelled transfer is faster."""
    return max(max(float(c[1]) for c in hw["dma_curve"]), float(hw["dma_fit_peak_bytes_per_s"]))


def dma_seconds_per_cpe(hw, nbytes, chunk_bytes):
    """Seconds one CPE spends moving `nbytes` in contiguous chunks of `chunk_bytes`, when all
    CPEs share the core group's bandwidth."""
    if not isinstance(nbytes, np.ndarray) and not isinstance(chunk_bytes, np.ndarray):
        if nbytes <= 0:
            return 0.0
        return float(nbytes) / (_bw_scalar(hw, chunk_bytes if chunk_bytes > 0 else 1) / float(hw["cpes"]))
    nb = np.asarray(nbytes, dtype=float)
    bw = dma_bandwidth(hw, np.where(np.asarray(chunk_bytes) > 0, chunk_bytes, 1)) / float(hw["cpes"])
    out = np.where(nb > 0, nb / bw, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def issue(hw, fp, mem, simd=False):
    """Cycles of one loop iteration with `fp` floating-point (or vector) operations and
    `mem` LDM loads/stores (already weighted), plus the loop's integer overhead."""
    rate = float(hwget(hw, "fma_per_cycle_simd" if simd else "fma_per_cycle_scalar"))
    f = fp / rate
    m = mem / float(hwget(hw, "ldm_loads_per_cycle")) + float(hwget(hw, "loop_overhead_cycles"))
    if hwget(hw, "dual_issue"):
        return np.maximum(f, m) if isinstance(f, np.ndarray) or isinstance(m, np.ndarray) else max(f, m)
    return f + m


def op_cycles(e, hw):
    """Floating-point issue cycles of an expression (divisions and transcendentals weighted)."""
    if hasattr(e, "buf"):                  # a load: memory work, not floating point
        return 0.0
    n = 0.0
    if isinstance(e, Bin):
        if e.op == "/":
            n += float(hwget(hw, "div_cycles"))
        elif e.op == "pow" and isinstance(e.b, Const) and e.b.value in POW_HELPERS:
            n += 2 * float(hwget(hw, "div_cycles")) + 2     # two square roots, a product, a compare
        elif e.op == "pow":
            n += 2 * float(hwget(hw, "transcendental_cycles"))
        else:
            n += 1
    elif isinstance(e, Un):
        if e.op in TRANSCENDENTAL:
            n += float(hwget(hw, "transcendental_cycles"))
        elif e.op == "sqrt":
            n += float(hwget(hw, "div_cycles"))
        else:
            n += 1
    elif isinstance(e, Select):
        n += 1
    for c in children(e):
        n += op_cycles(c, hw)
    return n


def rma_share(hw):
    """(bytes per cycle, latency cycles) of the RMA broadcast through which a row (array) shares
    what one CPE fetched on SW26010-Pro (toolchain `rma_broadcast`), else None. Every member pays
    bytes / rate + latency per fetch: it waits until the issuer's broadcast lands
    (runtime/athread/src/rma.c charges the same)."""
    if not hwget(hw, "rma_broadcast"):
        return None
    return float(hw["rma_bytes_per_cycle"]), float(hw["rma_latency_cycles"])


def rma_cycles(rma, full_bytes):
    """Cycles a member of a sharing row (array) spends on one RMA broadcast of `full_bytes`."""
    return full_bytes / rma[0] + rma[1]


def sync_cycles(hw, width):
    """Cycles of the barrier around a broadcast to `width` CPEs: a mesh row's, else the array's."""
    return float(hwget(hw, "row_sync_cycles" if width <= 8 else "array_sync_cycles"))


def peak_flops(hw):
    return float(hw["peak_flops_per_cpe"]) * int(hw["cpes"])


def roof_bandwidth(hw):
    return float(hw.get("roofline_bytes_per_s", hw["mem_bandwidth_bytes_per_s"]))


def roofline_seconds(hw, flops, compulsory_bytes):
    return max(flops / peak_flops(hw), compulsory_bytes / roof_bandwidth(hw))


def cpe_seconds(hw, dma_s, comp_s, exposed_s, double_buffered):
    """Time of one CPE: overlapped when double-buffered, serial otherwise (arrays welcome)."""
    if double_buffered:
        ov = float(hwget(hw, "dma_overlap"))
        d = np.maximum(dma_s - exposed_s, 0.0)
        return np.maximum(d, comp_s) + (1.0 - ov) * np.minimum(d, comp_s) + exposed_s
    return dma_s + comp_s


def kernel_seconds(hw, cpe_s):
    return float(hwget(hw, "spawn_seconds")) + float(np.max(cpe_s) if np.size(cpe_s) else 0.0)


def ceil_div(a, b):
    return -(-a // b)


def clock(hw):
    return float(hw["clock_hz"])


__all__ = ["dma_bandwidth", "max_dma_bandwidth", "dma_seconds_per_cpe", "issue", "op_cycles", "roofline_seconds",
           "cpe_seconds", "kernel_seconds", "hwget"]
