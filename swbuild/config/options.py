"""The compiler options a recipe, `--set KEY=VALUE` and `scons KEY=VALUE` accept: one table
(`OPTIONS`) with each option's kind, default, help text, recipe field and the target
families whose compiler reads it. recipe.py validates recipes against it; `scons -h` and
docs/recipes.md print it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# -- compiler options ------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    key: str
    kind: str             # "int", "float", "onoff", "int_or_auto", "float_or_off", "parallel", "weights", "blocks"
    default: object
    help: str
    field: str            # where it lives in a recipe: "batch", "check.seed", "options.simd"
    minimum: float | None = None
    families: tuple = ()  # the target families whose compiler reads it; () = every family

    @property
    def allowed(self):
        """Human text of the allowed values (used in errors and `scons -h`)."""
        lo = "" if self.minimum is None else f" >= {self.minimum:g}"
        return {"int": f"an integer{lo}", "float": f"a number{lo}", "onoff": "on, off",
                "int_or_auto": f"auto or an integer{lo} (bytes)", "float_or_off": f"off or a number{lo}",
                "parallel": "data, pipeline", "weights": "embed, file", "blocks": "off, on, all"}[self.kind]

    def parse(self, value):
        """The typed value of `value` (a recipe value or a command-line string); ValueError."""
        if self.kind == "onoff":
            if isinstance(value, bool):      # YAML 1.1 reads a bare on/off as a boolean
                return "on" if value else "off"
            if isinstance(value, str) and value.strip().lower() in ("on", "off"):
                return value.strip().lower()
            raise ValueError(f"bad value {value!r}")
        if self.kind == "blocks":
            if isinstance(value, bool):
                return "on" if value else "off"
            if isinstance(value, str) and value.strip().lower() in ("off", "on", "all"):
                return value.strip().lower()
            raise ValueError(f"bad value {value!r}")
        if self.kind == "weights":
            if isinstance(value, str) and value.strip().lower() in ("embed", "file"):
                return value.strip().lower()
            raise ValueError(f"bad value {value!r}")
        if self.kind == "parallel":
            if isinstance(value, str) and value.strip().lower() in ("data", "pipeline"):
                return value.strip().lower()
            raise ValueError(f"bad value {value!r}")
        if self.kind == "int_or_auto" and isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        if self.kind == "float_or_off" and (value is False or isinstance(value, str) and value.strip().lower() == "off"):
            return "off"
        if self.kind in ("int", "int_or_auto"):
            out = _as_int(value)
        else:
            out = _as_float(value)
        if out is None:
            raise ValueError(f"bad value {value!r}")
        if self.minimum is not None and out < self.minimum:
            raise ValueError(f"{value!r} is too small")
        return out


def _as_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        return int(v)
    return None


def _as_float(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):   # PyYAML reads 1e-3 (no dot) as a string
        try:
            return float(v)
        except ValueError:
            return None
    return None


OPTIONS: dict[str, Option] = {o.key: o for o in (
    Option("batch", "int", 1, "batch size: overrides the first dimension of every input", "batch", 1),
    Option("seed", "int", 0, "seed of the check inputs (and of zoo weights)", "check.seed", 0),
    Option("rtol", "float", 1e-3, "relative tolerance of `check` against onnxruntime", "check.rtol", 0),
    Option("atol", "float", 1e-4, "absolute tolerance of `check` against onnxruntime", "check.atol", 0),
    # float16 has 11 significant bits (a unit roundoff of 2**-11 ~ 4.9e-4): ten of its ulps
    # relative, and as much absolute where a value cancels to near zero; a ResNet-18 / BERT
    # converted to fp16 differs from its float32 twin by ~1e-3 of its peak in onnxruntime itself
    Option("fp16_rtol", "float", 1e-2, "relative tolerance of `check` for float16 outputs (the larger of this "
           "and rtol)", "check.fp16_rtol", 0),
    Option("fp16_atol", "float", 1e-2, "absolute tolerance of `check` for float16 outputs (the larger of this "
           "and atol)", "check.fp16_atol", 0),
    Option("timeout", "int", 3600, "seconds `check` lets the runner run before it stops it and names the kernel "
           "that was running", "check.timeout", 1),
    Option("partition", "onoff", "on", "loop partitioning: split loop ranges so tiling guards vanish", "options.partition"),
    Option("double_buffer", "onoff", "on", "overlap DMA with compute by double-buffering local memory "
           "(DianNao: the load / compute / store pipeline over ping-pong NRAM)", "options.double_buffer"),
    Option("simd", "onoff", "on", "use the target's SIMD types in generated slave/device code", "options.simd", families=("sunway",)),
    Option("row_share", "onoff", "on", "Sunway: the 8 CPEs of a mesh row share input tiles through one broadcast DMA "
           "(where the cost model says it wins)", "options.row_share", families=("sunway",)),
    Option("traffic_target", "float_or_off", "off", "trade modelled time for main-memory traffic until traffic "
           "<= this many times the compulsory bytes (Sunway; e.g. 1.5)", "options.traffic_target", 1, families=("sunway",)),
    Option("core_groups", "int", 1, "MPI ranks per node, one per core group (Sunway; docs/mpi.md)", "options.core_groups", 1, families=("sunway",)),
    Option("nodes", "int", 1, "nodes; the run has core_groups x nodes MPI ranks (Sunway)", "options.nodes", 1, families=("sunway",)),
    Option("parallel", "parallel", "data", "how ranks share the work: data (split the batch) or pipeline (consecutive kernel stages)",
           "options.parallel", families=("sunway",)),
    Option("channel_blocks", "blocks", "off", "Sunway: model-internal activations stored [N][C/8][H][W][8] (weights "
           "re-laid out to match) where the cost model says the kernels get faster (on), or wherever the kernels "
           "can take it (all); docs/optimizer.md", "options.channel_blocks", families=("sunway",)),
    Option("grouping", "onoff", "on", "GraphTurbo grouping of kernels across layers; each group runs in one launch (docs/grouping.md)", "options.grouping"),
    Option("stitch", "onoff", "on", "Sunway, with grouping: a pooling or element-wise producer read by one kernel of "
           "its group is recomputed in that kernel's LDM, so its output never reaches main memory (docs/grouping.md)",
           "options.stitch", families=("sunway",)),
    Option("mesh_gemm", "blocks", "off", "SW26010: 1x1 convolutions as SUMMA over the 8x8 mesh (register "
           "communication) where the cost model says they get faster (on), or wherever they can (all); "
           "docs/grouping.md", "options.mesh_gemm", families=("sunway",)),
    Option("cluster_split", "onoff", "on", "DianNao: convolutions may split output-channel blocks over clusters, rows over a cluster's cores (docs/diannao.md)", "options.cluster_split", families=("diannao",)),
    Option("weight_prefetch", "onoff", "on", "DianNao: weight blocks through SRAM overlap GDRAM -> SRAM of the next chunk or block (__memcpy_async) with SRAM -> WRAM and the convolution of the current one (docs/diannao.md)", "options.weight_prefetch", families=("diannao",)),
    Option("weight_broadcast", "blocks", "off", "DianNao: in rows mode each cluster loads a quarter of a weight block GDRAM -> SRAM and sends it to the other clusters' SRAM (__memcpy SRAM2SRAM with id_dst_cluster), so weights leave GDRAM once: where the schedule's estimate says it is no slower (on), or wherever it applies (all); docs/diannao.md", "options.weight_broadcast", families=("diannao",)),
    Option("input_stationary", "blocks", "on", "DianNao: a convolution keeps its input tile in NRAM and loops over output-channel blocks inside it, the cluster's weight blocks held in SRAM, where the schedule's estimate says it is faster (on), or wherever it fits (all); docs/diannao.md", "options.input_stationary", families=("diannao",)),
    Option("sram_residency", "onoff", "on", "DianNao, with grouping: an intermediate written and read only inside one grouped launch stays in its cluster's SRAM where every cluster reads back what its own cores wrote (docs/diannao.md)", "options.sram_residency", families=("diannao",)),
    Option("residency_split", "onoff", "on", "DianNao, with sram_residency: an element-wise kernel read only by rows-mode convolutions splits its pixels over the tasks as they split their rows, so its output can stay in each cluster's SRAM (docs/diannao.md)", "options.residency_split", families=("diannao",)),
    Option("sram_concats", "onoff", "on", "DianNao, with sram_residency: a channel Concat written in place (its inputs slices of it) stays in its clusters' SRAM where every cluster reads back what its own cores wrote, over all its writers and readers in one launch (docs/diannao.md)", "options.sram_concats", families=("diannao",)),
    Option("merge_launches", "onoff", "on", "DianNao, with grouping: consecutive kernels run in one launch with a __sync_all() between two of them, whatever their groups (docs/diannao.md)", "options.merge_launches", families=("diannao",)),
    Option("cross_layer_prefetch", "onoff", "on", "DianNao, with grouping: in a launch of several kernels, the first weight chunk of the next convolution goes GDRAM -> SRAM while the current kernel computes its last step (docs/diannao.md)", "options.cross_layer_prefetch", families=("diannao",)),
    Option("stem_fold", "onoff", "on", "DianNao: a convolution on a channels-first image (a stem) may fold its kernel height into its input channels (a tile of one output row holding its window's image rows as channels), where the schedule's estimate says it is faster (docs/diannao.md)", "options.stem_fold", families=("diannao",)),
    Option("cycle_ops", "onoff", "on", "DianNao: a convolution epilogue's per-channel operands (bias, per-channel requantization multipliers) stay one row of channels in NRAM, read by __bang_cycle_add/sub/mul, instead of being replicated over the tile by NRAM2NRAM copies (docs/diannao.md)", "options.cycle_ops", families=("diannao",)),
    Option("concat_in_place", "onoff", "on", "DianNao: an input of a channel Concat of NHWC tensors is written by its producer straight into its channels of the Concat output (segmented copies), and the Concat's copy kernels are dropped; a kernel copying a channel window of an NHWC tensor is dropped too, its readers reading the window in place (read_slices.py; docs/diannao.md)", "options.concat_in_place", families=("diannao",)),
    Option("weights", "weights", "embed", "embed: the weights are linked into the library; file: read from "
           "<prefix>_weights.bin at run time (a big model's build tree holds them once)", "options.weights"),
    Option("ldm_reserve", "int_or_auto", "auto", "bytes of local memory kept back from kernel buffers (auto: the target's own number)", "options.ldm_reserve", 0, families=("sunway",)),
)}
_CHECK_KEYS = {o.field.split(".")[1]: o for o in OPTIONS.values() if o.field.startswith("check.")}
_OPTION_KEYS = {o.key: o for o in OPTIONS.values() if o.field.startswith("options.")}
# Kept in a recipe's options only when given, so a one-core-group build keeps its lock file and SCons signature (swbuild/driver/mpi.py reads them with their defaults).
WHEN_GIVEN = ("core_groups", "nodes", "parallel", "grouping", "weights", "channel_blocks", "stitch", "mesh_gemm", "cluster_split", "weight_prefetch", "weight_broadcast", "input_stationary", "sram_residency", "residency_split", "sram_concats", "concat_in_place", "merge_launches", "stem_fold", "cross_layer_prefetch", "cycle_ops")


def inapplicable_options(options, family) -> list:
    """Options set to something other than their default that the compiler of `family`
    never reads (they would change nothing): one line each, naming the option."""
    out = []
    for key, value in sorted((options or {}).items()):
        o = OPTIONS.get(key)
        if o is None or not o.families or family in o.families or value in (None, o.default):
            continue
        out.append(f"option {key}={value} does not apply to the {family} family (it is read by "
                   f"{', '.join(o.families)} targets only: {o.help}); remove it or build for such a target")
    return out


def option_on(options, key):
    """An on/off option of a compiler options dict (default on): off, false, 0, no, False."""
    v = options.get(key, "on")
    return not (v is False or str(v).lower() in ("off", "false", "0", "no"))
