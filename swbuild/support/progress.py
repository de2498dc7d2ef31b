"""Progress of long work (code generation, check): `[8/18] choose_tiles (59 kernels)`.

On a terminal (stderr is a TTY) one line is redrawn as a bar; elsewhere nothing is printed,
unless SWBUILD_PROGRESS=1 asks for plain lines (CI logs). SWBUILD_PROGRESS=0, or the CLI's
-Q, silences it. SCons prints one line per build step on its own; this covers the steps
that are long inside one command.
"""
from __future__ import annotations

import os
import sys
import time

_WIDTH = 24


def mode(stream=None):
    """'bar', 'lines' or None."""
    v = os.environ.get("SWBUILD_PROGRESS", "")
    if v == "0":
        return None
    if v == "1":
        return "lines"
    stream = stream or sys.stderr
    try:
        return "bar" if stream.isatty() else None
    except (AttributeError, ValueError):
        return None


def quiet():
    """Silence progress in this process and the ones it starts (the CLI's -Q)."""
    os.environ["SWBUILD_PROGRESS"] = "0"


class Steps:
    """`with Steps(n, "vgg16") as p: p.step("choose_tiles")` → [i/n] lines or a bar."""

    def __init__(self, total, what="", stream=None):
        self.total, self.what, self.i = total, what, 0
        self.stream = stream or sys.stderr
        self.mode = mode(self.stream)
        self.t0 = time.monotonic()

    def step(self, text):
        self.i += 1
        if self.mode == "lines":
            self.stream.write(f"[{self.i}/{self.total}] {self.what}: {text}\n" if self.what else
                              f"[{self.i}/{self.total}] {text}\n")
        elif self.mode == "bar":
            done = int(_WIDTH * (self.i - 1) / max(self.total, 1))
            bar = "#" * done + "." * (_WIDTH - done)
            line = f"[{bar}] {self.i}/{self.total} {self.what} {text}"[:max(20, _columns() - 1)]
            self.stream.write("\r\x1b[K" + line)
        self.stream.flush()

    def close(self):
        if self.mode == "bar":
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _columns():
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (OSError, ValueError):
        return 80
