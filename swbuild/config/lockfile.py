"""<model>.lock.json: what went into a build and what came out, by content hash.

Byte-identical across machines and directories (no timestamps, no absolute paths), so two
builds can be compared with `cmp` and CI can diff a lock against the committed one.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .recipe import sha256_file

LOCK_VERSION = 1


def lock_document(*, recipe_normalized, inputs, toolchain, outputs, swbuild_version, digests=None) -> dict:
    """`digests`: the sha256 of outputs by file name, when the writer hashed them as it wrote
    (compiler.write_outputs); the others are read back and hashed."""
    digests = digests or {}
    names = [Path(p).name for p in outputs.values()]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"outputs with the same file name: {', '.join(dupes)}")
    return {
        "lock_version": LOCK_VERSION,
        "swbuild_version": str(swbuild_version),
        "target": toolchain.name,
        "toolchain": {"name": toolchain.name, "sha256": toolchain.sha256},
        "recipe": recipe_normalized,
        "inputs": {str(k): sha256_file(p) for k, p in inputs.items()},
        # Keyed by file name: the output directory is the caller's business.
        "outputs": {Path(p).name: digests.get(Path(p).name) or sha256_file(p) for p in outputs.values()},
    }


def dumps(doc) -> str:
    return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def write_lock(path, *, recipe_normalized, inputs, toolchain, outputs, swbuild_version, digests=None) -> Path:
    """Write the lock atomically (temp file in the same directory + os.replace)."""
    path = Path(path)
    text = dumps(lock_document(recipe_normalized=recipe_normalized, inputs=inputs, toolchain=toolchain,
                               outputs=outputs, swbuild_version=swbuild_version, digests=digests))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)   # mkstemp makes 0600; a lock is as readable as the sources
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read_lock(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
