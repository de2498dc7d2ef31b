"""What makes a recipe error complete: every error at once (Errors), "did you mean" for
misspelt keys and values, the sha256 to paste, and the targets a source kind cannot build."""
from __future__ import annotations

import hashlib
import re
from contextlib import contextmanager

from ..support.errors import RecipeError, SwbuildError, did_you_mean

SCOP_FAMILIES = ("sunway",)     # C SCoPs become Athread code: the DianNao backend takes loop nests from ONNX only


def line_in(lines, key):
    """Line of a dotted field, else of its nearest parent that has one; 0 if none."""
    while key:
        if key in lines:
            return lines[key]
        parent = re.sub(r"(\.[^.\[]+|\[\d+\])$", "", key)
        key = "" if parent == key else parent
    return 0


class Errors:
    """Collects a recipe's errors so the user sees all of them at once, not one per run."""

    def __init__(self, path, lines):
        self.path, self.lines, self.found = path, lines, []

    def __call__(self, fld, msg):
        return RecipeError(self.path, line_in(self.lines, fld), fld, msg)

    def add(self, fld, msg):
        self.found.append(self(fld, msg))

    @contextmanager
    def section(self):
        """Run a check that raises its first error; keep the error and go on."""
        try:
            yield
        except RecipeError as e:
            self.found.append(e)

    def raise_any(self):
        if self.found:
            raise RecipeError.of(self.found)


def unknown(key, allowed, what="unknown field"):
    return f"{what}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"


def paste_sha(p):
    """The line to paste into the recipe, when the file is there to hash."""
    return f'; the file\'s is  sha256: "{sha256_file(p)}"' if p.is_file() else f" (and {p} does not exist)"


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scop_family_problem(target, family):
    """Why a C SCoP cannot be built for `target` of `family`, or None."""
    if family in SCOP_FAMILIES:
        return None
    return (f"target '{target}' is a {family} target; C files with #pragma scop regions compile for "
            f"{', '.join(SCOP_FAMILIES)} targets only (e.g. sunway-emu, sunway-pro-emu)")


def scop_target_problem(target, project_dir=None, err=None):
    """Raise (through `err(message)`, else a SwbuildError) unless `target` can build C SCoPs."""
    from . import toolchain
    msg = scop_family_problem(target, toolchain.load(target, project_dir).family)
    if msg:
        raise err(msg) if err else SwbuildError(msg)
