"""One swbuild at a time per output directory.

Two `swbuild compile/check/report` runs of models with the same name write the same
build/<target>/<model>: the second would rewrite sources and objects under the first's
compiler and runner (`objcopy: input file is empty`). An advisory lock serialises them; the
waiting one says so on stderr. The lock file lives in the temp directory, keyed by the output
directory's real path, so the output directory holds only what the build writes.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
import tempfile
from pathlib import Path


def lock_path(out_dir) -> Path:
    key = hashlib.sha256(os.fsencode(os.path.realpath(out_dir))).hexdigest()[:24]
    d = Path(tempfile.gettempdir()) / f"swbuild-locks-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d / f"{key}.lock"


@contextlib.contextmanager
def locked(out_dir):
    fd = os.open(lock_path(out_dir), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"swbuild: waiting for another swbuild that is using {out_dir}", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # closing releases the lock
