"""Recipes: one schema, written in YAML or TOML, that says which model to build and how.

Every error names the file, the line and the field, because a recipe is the one file
users edit by hand. `normalized()` is what the build depends on: a canonical dict with no
absolute paths, so moving a project to another directory rebuilds nothing.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..support.errors import RecipeError, did_you_mean
from .recipe_checks import Errors as _Errors
from .recipe_checks import line_in as _line_in
from .recipe_checks import paste_sha as _paste_sha
from .recipe_checks import scop_target_problem, sha256_file  # noqa: F401  (sha256_file: used by the CLI)
from .recipe_checks import unknown as _unknown
from ..support.names import model_name_problem
from .options import OPTIONS, WHEN_GIVEN, Option, inapplicable_options, option_on  # noqa: F401  (re-exported)
from .options import _CHECK_KEYS, _OPTION_KEYS, _as_int
from .recipe_text import parse_toml as _parse_toml
from .recipe_text import parse_yaml as _parse_yaml

RECIPE_SUFFIXES = (".yaml", ".yml", ".toml")
DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64", "bool")
TOP_FIELDS = ("model", "source", "inputs", "batch", "targets", "options", "check")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_sets(items) -> dict:
    """["batch=2", "simd=off"] → {"batch": 2, "simd": "off"}, validated against OPTIONS."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep:
            raise RecipeError(None, 0, item, f"expected KEY=VALUE; keys: {', '.join(OPTIONS)}")
        opt = OPTIONS.get(key)
        if opt is None:
            raise RecipeError(None, 0, key, _unknown(key, list(OPTIONS), "unknown option"))
        try:
            out[key] = opt.parse(value)
        except ValueError as e:
            raise RecipeError(None, 0, key, f"{e}; allowed: {opt.allowed}") from None
    return out


# -- the recipe ------------------------------------------------------------------------

@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple
    dtype: str = "float32"


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    source_kind: str            # "zoo" | "onnx" | "scop"
    source: object              # zoo model name, or absolute Path of the ONNX file
    sha256: str | None
    inputs: tuple
    batch: int
    targets: tuple              # () means every target
    options: dict
    check: dict
    source_ref: str = ""        # the onnx path as written (relative), for normalized()
    scop: dict = field(default_factory=dict)   # scop sources: other C files, include dirs, defines
    lines: dict = field(default_factory=dict, compare=False, repr=False)

    def line_of(self, field_name) -> int:
        """Line of `field_name` ("source.sha256", "inputs[0].shape"), or of its closest parent."""
        return _line_in(self.lines, field_name)

    def error(self, field_name, message):
        return RecipeError(self.path, self.line_of(field_name), field_name, message)

    def with_overrides(self, overrides) -> "Recipe":
        """A copy with `parse_sets()` values applied (command line beats recipe)."""
        if not overrides:
            return self
        batch, check, options = self.batch, dict(self.check), dict(self.options)
        for key, value in overrides.items():
            opt = OPTIONS[key]
            where, _, sub = opt.field.partition(".")
            if where == "batch":
                batch = value
            elif where == "check":
                check[sub] = value
            else:
                options[sub] = value
        inputs = tuple(InputSpec(i.name, (batch,) + tuple(i.shape[1:]), i.dtype) for i in self.inputs)
        return dataclasses.replace(self, batch=batch, check=check, options=options, inputs=inputs)

    def normalized(self) -> dict:
        """Canonical JSON-able form: what generated code depends on, minus absolute paths."""
        if self.source_kind == "scop":
            src = {**self.scop["refs"], "defines": self.scop["defines"]}
        elif self.source_kind == "zoo":
            src = {"zoo": self.source}
        else:
            src = {"onnx": self.source_ref, "sha256": self.sha256}
        doc = {"model": self.name, "source": src, "batch": self.batch,
               "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in self.inputs],
               "targets": sorted(self.targets), "options": self.options, "check": self.check}
        return json.loads(json.dumps(doc, sort_keys=True))

    def allows(self, target) -> bool:
        return not self.targets or target in self.targets

    def check_target(self, target):
        if not self.allows(target):
            raise self.error("targets", f"target '{target}' is not allowed by this recipe "
                                        f"(allowed: {', '.join(self.targets)})")
        if self.source_kind == "scop":
            scop_target_problem(target, project_dir_of(self.path), lambda msg: self.error("source.scop", msg))

    def verify_source(self):
        """Raise a RecipeError if the pinned ONNX file is missing or its sha256 differs
        (for a scop source: if a C file is missing)."""
        if self.source_kind == "scop":
            for f in [Path(self.source)] + list(self.scop["sources"]):
                if not f.is_file():
                    raise self.error("source", f"C file not found: {f}")
            return
        if self.source_kind != "onnx":
            return
        p = Path(self.source)
        if not p.is_file():
            raise self.error("source.onnx", f"model file not found: {p}")
        actual = sha256_file(p)
        if actual != self.sha256:
            raise self.error("source.sha256", f"{p} has sha256 {actual}, the recipe pins {self.sha256}; "
                                              f'if the new file is intended, set  sha256: "{actual}"')

    def source_files(self) -> list:
        """The model file and the external-data files it names (what the build reads); for a
        scop source, its C files (headers are found by the C scanner)."""
        if self.source_kind == "scop":
            return [Path(self.source)] + list(self.scop["sources"])
        if self.source_kind != "onnx":
            return []
        p = Path(self.source)
        if not p.is_file():
            return [p]
        return [p] + [p.parent / loc for loc in _external_data(str(p))]


_EXT_CACHE: dict = {}


def _external_data(path):
    """Locations of ONNX external data (cached per file state: scanners run every build)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _EXT_CACHE:
        import onnx
        try:
            m = onnx.load(path, load_external_data=False)
        except Exception:  # a corrupt model is the frontend's error to report
            return []
        tensors = list(m.graph.initializer)
        for node in m.graph.node:
            tensors += [a.t for a in node.attribute if a.HasField("t")]
        locs = set()
        for t in tensors:
            for kv in t.external_data:
                if kv.key == "location":
                    locs.add(kv.value)
        _EXT_CACHE[key] = sorted(locs)
    return _EXT_CACHE[key]


# -- reading ---------------------------------------------------------------------------

def load_recipe(path) -> Recipe:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RecipeError(path, 0, None, f"cannot read recipe: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise RecipeError(path, line, None, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); "
                                            "save the recipe as UTF-8") from None
    if path.suffix == ".toml":
        data, lines = _parse_toml(path, text)
    elif path.suffix in (".yaml", ".yml"):
        data, lines = _parse_yaml(path, text)
    else:
        raise RecipeError(path, 0, None, f"unknown recipe format '{path.suffix}' (use {', '.join(RECIPE_SUFFIXES)})")
    return _build(path, data, lines)


def project_dir_of(recipe_path) -> Path:
    """<project>/recipes/x.yaml → <project>; a recipe elsewhere is its own project."""
    d = Path(recipe_path).absolute().parent
    return d.parent if d.name == "recipes" else d


def _build(path, data, lines) -> Recipe:
    if data is None:
        raise RecipeError(path, 0, None, "empty recipe: it needs at least `model` and `source`")
    if not isinstance(data, dict):
        raise RecipeError(path, 1, None, "a recipe is a mapping of fields (model, source, ...)")
    errs = _Errors(path, lines)
    for key in data:
        if key not in TOP_FIELDS:
            errs.add(str(key), _unknown(key, TOP_FIELDS))
    for key in ("model", "source"):
        if key not in data:
            errs.found.append(RecipeError(path, 0, key, "missing required field"))

    name = None
    if "model" in data:
        name = data["model"]
        if not isinstance(name, str) or not name.strip():
            errs.add("model", "must be a non-empty string")
        elif model_name_problem(name.strip()):
            errs.add("model", model_name_problem(name.strip()))

    source_kind = source = sha = None
    ref, scop = "", {}
    if "source" in data:
        with errs.section():
            source_kind, source, sha, ref, scop = _source(data["source"], path, errs)
    batch_given = "batch" in data
    batch = data.get("batch", 1)
    if _as_int(batch) is None or isinstance(batch, str) or batch < 1:
        errs.add("batch", f"must be an integer >= 1, got {batch!r}")
        batch = 1

    inputs = _inputs(data.get("inputs", []), errs)
    if inputs and not batch_given:
        batch = inputs[0].shape[0]
    inputs = tuple(InputSpec(i.name, (batch,) + i.shape[1:], i.dtype) for i in inputs)

    targets = _targets(data.get("targets", []), path, errs, source_kind)

    opts = {} if data.get("options") is None else data["options"]
    options = {k: o.default for k, o in _OPTION_KEYS.items() if k not in WHEN_GIVEN}
    if not isinstance(opts, dict):
        errs.add("options", "must be a mapping of option: value")
        opts = {}
    for k, v in opts.items():
        if k not in _OPTION_KEYS:
            hint = f" (`{k}` is set by `{OPTIONS[k].field}`)" if k in OPTIONS else ""
            errs.add(f"options.{k}", _unknown(k, list(_OPTION_KEYS), f"unknown option{hint}"))
            continue
        with errs.section():
            options[k] = _typed(_OPTION_KEYS[k], v, f"options.{k}", errs)

    chk = {} if data.get("check") is None else data["check"]
    check = {k: o.default for k, o in _CHECK_KEYS.items()}
    if not isinstance(chk, dict):
        errs.add("check", "must be a mapping with rtol, atol, seed")
        chk = {}
    for k, v in chk.items():
        if k not in _CHECK_KEYS:
            errs.add(f"check.{k}", _unknown(k, list(_CHECK_KEYS)))
            continue
        with errs.section():
            check[k] = _typed(_CHECK_KEYS[k], v, f"check.{k}", errs)

    errs.raise_any()
    return Recipe(name=name.strip(), path=path, source_kind=source_kind, source=source, sha256=sha,
                  inputs=inputs, batch=batch, targets=targets, options=options, check=check,
                  source_ref=ref, scop=scop, lines=dict(lines))


_CHOICES = {"onoff": ("on", "off"), "parallel": ("data", "pipeline"), "blocks": ("off", "on", "all")}


def _typed(opt, value, fld, err):
    # Strings are for the command line; in a file an int must be an int (floats may be
    # strings because PyYAML reads 1e-3 as one).
    if opt.kind in ("int", "int_or_auto") and isinstance(value, str) and value.strip().lower() != "auto":
        raise err(fld, f"must be {opt.allowed}, got the string {value!r}")
    try:
        return opt.parse(value)
    except ValueError as e:
        hint = did_you_mean(str(value).strip().lower(), _CHOICES[opt.kind]) if opt.kind in _CHOICES else ""
        raise err(fld, f"{e}{hint}; allowed: {opt.allowed}") from None


SCOP_FIELDS = ("scop", "sources", "include", "defines")


def _rel(path, ref):
    p = Path(ref)
    return Path(os.path.normpath(p if p.is_absolute() else path.absolute().parent / p))


def _scop_source(src, path, err):
    """`scop: FILE.c` with optional `sources` (other C files), `include` dirs, `defines`."""
    for k in src:
        if k not in SCOP_FIELDS:
            raise err(f"source.{k}", _unknown(k, SCOP_FIELDS, "unknown field of a scop source"))
    ref = src["scop"]
    if not isinstance(ref, str) or not ref.endswith(".c"):
        raise err("source.scop", "must be the path of a .c file with #pragma scop regions, relative to the recipe")
    info = {}
    for k in ("sources", "include", "defines"):
        v = src.get(k, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise err(f"source.{k}", "must be a list of strings")
        info[k] = list(v)
    info["refs"] = {"scop": ref, **{k: list(info[k]) for k in ("sources", "include")}}
    info["sources"] = [_rel(path, x) for x in info["sources"]]
    info["include"] = [_rel(path, x) for x in info["include"]]
    return "scop", _rel(path, ref), None, Path(ref).as_posix(), info


def _source(src, path, err):
    if not isinstance(src, dict):
        raise err("source", "must be a mapping with `zoo: NAME`, `onnx: FILE` + `sha256: HEX`, or `scop: FILE.c`")
    if "scop" in src:
        return _scop_source(src, path, err)
    for k in src:
        if k not in ("zoo", "onnx", "sha256"):
            raise err(f"source.{k}", _unknown(k, ("zoo", "onnx", "sha256", "scop", "sources", "include", "defines")))
    if ("zoo" in src) == ("onnx" in src):
        raise err("source", "give exactly one of `zoo`, `onnx` and `scop`")
    if "zoo" in src:
        zoo = src["zoo"]
        if not isinstance(zoo, str) or not zoo:
            raise err("source.zoo", "must be the name of a zoo model")
        if "sha256" in src:
            raise err("source.sha256", "only an `onnx` source is pinned by sha256")
        known = _zoo_names()
        if known is not None and zoo not in known:
            raise err("source.zoo", f"unknown zoo model '{zoo}'{did_you_mean(zoo, known)}; "
                                    f"available: {', '.join(sorted(known))}")
        return "zoo", zoo, None, "", {}
    ref = src["onnx"]
    if not isinstance(ref, str) or not ref:
        raise err("source.onnx", "must be a path to an .onnx file, relative to the recipe")
    p = Path(ref)
    absolute = Path(os.path.normpath(p if p.is_absolute() else path.absolute().parent / p))
    if "sha256" not in src:
        raise err("source.onnx", f"an `onnx` source needs `sha256: <64 hex digits>` to pin the file{_paste_sha(absolute)}")
    sha = src["sha256"]
    if not isinstance(sha, str) or not _SHA256.match(sha):
        hint = " (quote it: unquoted digits read as a number)" if not isinstance(sha, str) else ""
        raise err("source.sha256", f"must be 64 hex digits, got {sha!r}{hint}{_paste_sha(absolute)}")
    shown = p.name if p.is_absolute() else p.as_posix()
    return "onnx", absolute, sha.lower(), shown, {}


def _zoo_names():
    """Names the built-in zoo offers, if it says (None: do not validate)."""
    try:
        from .. import zoo
    except Exception:
        return None
    for attr in ("names", "available", "MODELS"):
        obj = getattr(zoo, attr, None)
        if callable(obj):
            try:
                return set(obj())
            except Exception:
                return None
        if isinstance(obj, dict):
            return set(obj)
    return None


INPUT_FIELDS = ("name", "shape", "dtype")


def _inputs(raw, errs):
    if not isinstance(raw, list):
        errs.add("inputs", "must be a list of {name, shape, dtype}")
        return []
    out, seen = [], set()
    for i, item in enumerate(raw):
        with errs.section():
            spec = _input(i, item, seen, errs)
            if spec is not None:
                out.append(spec)
    return out


def _input(i, item, seen, errs):
    """One input entry; every problem of it is collected (a bad shape does not hide a bad dtype)."""
    f = f"inputs[{i}]"
    if not isinstance(item, dict):
        raise errs(f, "must be a mapping with name, shape, dtype")
    n_before = len(errs.found)
    for k in item:
        if k not in INPUT_FIELDS:
            errs.add(f"{f}.{k}", _unknown(k, INPUT_FIELDS))
    name = item.get("name")
    if not isinstance(name, str) or not name:
        errs.add(f"{f}.name", "missing or empty input name")
    elif name in seen:
        errs.add(f"{f}.name", f"duplicate input '{name}'")
    else:
        seen.add(name)
    shape = item.get("shape")
    if not isinstance(shape, list) or not shape or any(_as_int(d) is None or isinstance(d, str) or d < 1 for d in shape):
        errs.add(f"{f}.shape", f"must be a non-empty list of positive integers, got {shape!r}")
    dtype = item.get("dtype", "float32")
    if dtype not in DTYPES:
        errs.add(f"{f}.dtype", f"unknown dtype {dtype!r}{did_you_mean(dtype, DTYPES)}; allowed: {', '.join(DTYPES)}")
    if len(errs.found) > n_before:
        return None
    return InputSpec(name, tuple(shape), dtype)


def _targets(raw, path, errs, source_kind=None):
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or any(not isinstance(t, str) for t in raw):
        errs.add("targets", "must be a list of target names")
        return ()
    from . import toolchain
    known = toolchain.available(project_dir_of(path))
    for i, t in enumerate(raw):
        if t not in known:
            errs.add(f"targets[{i}]", f"unknown target '{t}'{did_you_mean(t, known)}; allowed: {', '.join(known)}")
        elif source_kind == "scop":
            with errs.section():
                scop_target_problem(t, project_dir_of(path), lambda msg, i=i: errs(f"targets[{i}]", msg))
    return tuple(dict.fromkeys(raw))


# -- finding recipes in a project ------------------------------------------------------

def list_models(project_dir) -> list:
    d = Path(project_dir) / "recipes"
    return sorted({p.stem for p in d.iterdir() if p.suffix in RECIPE_SUFFIXES and p.is_file()}) if d.is_dir() else []


def find_recipe(project_dir, model_name) -> Path:
    d = Path(project_dir) / "recipes"
    found = [d / f"{model_name}{s}" for s in RECIPE_SUFFIXES if (d / f"{model_name}{s}").is_file()]
    if not found:
        models = list_models(project_dir)
        raise RecipeError(d, 0, "model", f"no recipe for model '{model_name}' "
                                         f"(available: {', '.join(models) or 'none'})")
    if len(found) > 1:
        raise RecipeError(d, 0, "model", f"several recipes for model '{model_name}': "
                                         f"{', '.join(p.name for p in found)}; keep one")
    return found[0]
