"""The zoo's model cache: a generated zoo model kept on disk, so a rebuild does not draw
vgg16's 138 M seeded weights again (2 s of CPU).

An entry is keyed by the model's name, batch and seed, swbuild's version and a hash of the
zoo's own source files (a changed architecture or initialisation is a miss, never a stale
model). It holds the model without weights (`model.onnx`), the weights end to end
(`weights.bin`, each array 64-byte aligned) and their index (`index.json`); a hit maps the
weights copy-on-write (np.memmap), so reading them costs page faults, not a copy, and an
in-place write cannot reach the file. A hit gives arrays equal to the generated ones: the
model bytes are the same with and without the cache.

    SWBUILD_ZOO_CACHE=off     no cache
    SWBUILD_ZOO_CACHE=DIR     entries in DIR
    (unset)                   $XDG_CACHE_HOME/swbuild/zoo (~/.cache/...)

Entries are written into a temporary directory and renamed into place; an entry that is
incomplete or does not match (sizes, key) is a miss and is rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from .. import __version__
from ..support.cachedir import user_cache_dir
from .array_model import ArrayModel

ENV = "SWBUILD_ZOO_CACHE"
FORMAT = 1
ALIGN = 64


def cache_dir():
    """The cache directory, or None when the cache is off."""
    return user_cache_dir(ENV, "zoo")


_SOURCE = []


def _source_hash():
    """sha256 of the zoo's source files (architectures, initialisers, this format)."""
    if not _SOURCE:
        h = hashlib.sha256()
        for p in sorted(Path(__file__).parent.glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        _SOURCE.append(h.hexdigest())
    return _SOURCE[0]


def entry_key(name, batch, seed):
    return f"{FORMAT}|{__version__}|{_source_hash()}|{name}|{int(batch)}|{int(seed)}"


def _entry(d, key):
    return d / hashlib.sha256(key.encode()).hexdigest()


def load(name, batch, seed):
    """The cached ArrayModel, or None (no cache, a miss, or an unusable entry)."""
    d = cache_dir()
    if d is None:
        return None
    key = entry_key(name, batch, seed)
    e = _entry(d, key)
    try:
        index = json.loads((e / "index.json").read_text())
        if index.get("key") != key:
            return None
        size = (e / "weights.bin").stat().st_size
        if size != index["size"]:
            return None
        proto = onnx.load_model_from_string((e / "model.onnx").read_bytes())
        blob = np.memmap(e / "weights.bin", dtype=np.uint8, mode="c") if size else np.zeros(0, np.uint8)
        arrays = {}
        for n, dt, shape, off in index["arrays"]:
            dt = np.dtype(dt)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if off + nbytes > size:
                return None
            arrays[n] = blob[off:off + nbytes].view(dt).reshape(shape)
    except (OSError, ValueError, TypeError, KeyError, DecodeError):
        return None         # absent, incomplete or corrupt: the model is generated and store() rewrites it
    return ArrayModel(proto, arrays)


def store(name, batch, seed, model):
    """Write an entry atomically; a cache that cannot be written is skipped (it only saves time)."""
    d = cache_dir()
    if d is None:
        return
    key = entry_key(name, batch, seed)
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=d, prefix=".tmp-"))
        index, at = [], 0
        with open(tmp / "weights.bin", "wb") as f:
            for n, a in model.arrays.items():
                a = np.ascontiguousarray(a)
                off = -(-at // ALIGN) * ALIGN
                f.write(bytes(off - at))
                f.write(memoryview(a.reshape(-1).view(np.uint8)))
                index.append([n, a.dtype.str, list(a.shape), off])
                at = off + a.nbytes
        (tmp / "model.onnx").write_bytes(model.proto.SerializeToString())
        (tmp / "index.json").write_text(json.dumps({"key": key, "size": at, "arrays": index}))
        e = _entry(d, key)
        if e.exists():
            shutil.rmtree(e, ignore_errors=True)
        os.rename(tmp, e)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
