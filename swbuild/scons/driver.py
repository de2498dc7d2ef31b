"""The CLI's builds go through SCons: `swbuild compile --exe`, `check` and `report` run
`python -m SCons -f driver_sconstruct.py` on the same SwModel description a project's
SConstruct uses, so there is one list of build steps, and an up-to-date build is reused
(SCons decides; the CLI then only runs and compares).

Where things go: the model in `out`; the emulation runtime in build/<target>/_runtime and
SCons' signatures in ./.sconsign.dblite (as `scons` in the same directory would), or both
inside `out` when -o is given. A lock on that root serialises CLI builds sharing it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import deque
from pathlib import Path

from ..support.errors import SwbuildError, ToolchainError, UnsupportedError
from ..support.outlock import locked

SCONSTRUCT = Path(__file__).resolve().parent / "driver_sconstruct.py"
FAIL_FILE = "SWBUILD_FAIL_FILE"     # the generator writes why it failed here (cli.main)


def job_spec(tc, out, explicit_out, project, recipe=None, onnx=None, inputs=None, name=None, sets=(), verbose=False):
    # absolute: SCons reads a relative SConsignFile() against the SConstruct's directory (ours
    # is in the package), not the directory it builds in
    root = (Path(out) if explicit_out else Path.cwd()).absolute()
    return {"target": tc.name, "project": str(project), "out": str(out), "verbose": bool(verbose),
            "runtime_dir": str(Path(out) / "_runtime") if explicit_out else f"build/{tc.name}/_runtime",
            "sconsign": str(root / ".sconsign"), "recipe": str(recipe) if recipe else None,
            "onnx": str(onnx) if onnx else None, "inputs": {k: list(v) for k, v in (inputs or {}).items()},
            "name": name, "sets": list(sets or []), "root": str(root)}


def build(spec, targets=(), quiet=False, log=None):
    """Run SCons for one model; raises SwbuildError (UnsupportedError when the generator
    refused the model) with the failing step's message."""
    log = log or (lambda text: sys.stderr.write(text))
    fd, fail_path = tempfile.mkstemp(prefix="swbuild-fail-")
    os.close(fd)
    env = dict(os.environ, **{FAIL_FILE: fail_path})
    argv = [sys.executable, "-m", "SCons", "-Q", "-f", str(SCONSTRUCT), f"swjob={json.dumps(spec)}", *targets]
    tail = deque(maxlen=40)
    try:
        Path(spec["root"]).mkdir(parents=True, exist_ok=True)
        with locked(Path(spec["root"]) / ".sconsign"):
            # On a terminal the generator's progress bar goes straight to it; elsewhere its
            # stderr joins the log, so a failure's last lines can be quoted.
            tty = _isatty(sys.stderr) and not quiet
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=None if tty else subprocess.STDOUT,
                                 text=True, env=env)
            for line in p.stdout:
                tail.append(line)
                if line.startswith("swbuild: error:"):
                    continue        # a step's own report of what FAIL_FILE tells us: said once, by the CLI
                if not quiet or line.startswith(("swbuild:", "scons: ***")):
                    log(line)
            code = p.wait()
        failed = Path(fail_path).read_text() if Path(fail_path).stat().st_size else ""
    finally:
        os.unlink(fail_path)
    if code == 0:
        return
    if failed:
        doc = json.loads(failed.splitlines()[-1])
        if doc.get("unsupported"):
            raise UnsupportedError(doc["reason"])
        raise SwbuildError(doc["reason"])
    lines = [ln.rstrip() for ln in tail if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("scons: ***") or "error" in ln.lower()]
    raise ToolchainError("build failed: " + ("; ".join(errs[-3:]) if errs else "see the messages above"))


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def record_failure(error):
    """In a generator SCons runs for the CLI: tell the CLI why (cli.main calls this)."""
    path = os.environ.get(FAIL_FILE)
    if not path:
        return
    text = str(error).strip() or type(error).__name__
    doc = {"reason": getattr(error, "reason", None) or text, "unsupported": isinstance(error, UnsupportedError)}
    with open(path, "a") as f:
        f.write(json.dumps(doc) + "\n")
