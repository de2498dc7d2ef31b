"""The persistent schedule cache: a kernel's chosen tiles, kept across builds.

The tile search (ldm.py) is a pure function of the kernel's canonical form (shapes,
expressions, dtypes of its buffers, which inputs are constants), the hardware table and
budget, and the search options. An entry is keyed by that form plus the toolchain file's
hash, swbuild's version and a hash of the search's own source (this package and the cost
model: a development checkout changes the search between releases of one version), so a
rebuild after a small model change schedules only the kernels that changed, and CI can
carry the directory between runs. A hit returns exactly what the search would return:
output bytes are the same with and without the cache.

    SWBUILD_SCHEDULE_CACHE=off     no cache
    SWBUILD_SCHEDULE_CACHE=DIR     entries in DIR
    (unset)                        $XDG_CACHE_HOME/swbuild/schedules (~/.cache/...)

One JSON file per entry, named by the key's sha256 and holding the whole key (a hash
collision is a miss); written atomically (temporary file, then rename). An entry that
cannot be read or does not match is ignored and rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .... import __version__
from ....support.cachedir import user_cache_dir

ENV = "SWBUILD_SCHEDULE_CACHE"
FORMAT = 1


def cache_dir():
    """The cache directory, or None when the cache is off."""
    return user_cache_dir(ENV, "schedules")


_SOURCE = []


def source_hash():
    """sha256 of the search's source: the schedule package and the cost model."""
    if not _SOURCE:
        here = Path(__file__).parent
        h = hashlib.sha256()
        for p in sorted(here.glob("*.py")) + sorted((here.parent / "cost").glob("*.py")):
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        _SOURCE.append(h.hexdigest())
    return _SOURCE[0]


def entry_key(signature, toolchain_hash):
    """The full key text of a search: format, swbuild version, the search's source hash,
    toolchain hash, canonical form."""
    return f"{FORMAT}|{__version__}|{source_hash()}|{toolchain_hash}|{signature!r}"


def _path(d, key):
    return d / (hashlib.sha256(key.encode()).hexdigest() + ".json")


def load(key):
    """The tiles stored under `key` (an ordered list of (axis, size)), or None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        doc = json.loads(_path(d, key).read_text())
        if not isinstance(doc, dict) or doc.get("key") != key:
            return None
        tiles = [(str(a), int(t)) for a, t in doc["tiles"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None        # absent or corrupt: the search runs and store() rewrites it
    return tiles


def store(key, tiles):
    """Write an entry atomically; a cache that cannot be written is silently skipped (it only
    saves time, never changes results)."""
    d = cache_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "tiles": [[a, int(t)] for a, t in tiles]}, f)
        os.replace(tmp, _path(d, key))
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
