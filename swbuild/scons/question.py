"""`scons -q`: say which target is out of date and why.

SCons' question mode only sets exit status 1 and stops, so the user reads "building
terminated because of errors" with no error. In question mode the tool wraps the question
task to print SCons' own explanation (what --debug=explain prints) for the first target that
is out of date. Build and clean runs are untouched.
"""
from __future__ import annotations

import sys

import SCons.Script
import SCons.Script.Main as Main

_installed = []


def install():
    if _installed or not SCons.Script.GetOption("question"):
        return
    base = Main.QuestionTask.execute

    def execute(self):
        before = Main.exit_status
        base(self)
        if Main.exit_status and not before:
            t = self.targets[0]
            sys.stdout.write(f"scons: `{t}' is out of date: {_why(t)}\n")
            sys.stdout.flush()
    Main.QuestionTask.execute = execute


def _why(node, lines=4):
    """The first lines of SCons' explanation: a node whose Value (recipe, options) changed
    lists every other input too, which says nothing more."""
    if not node.exists():
        return "it does not exist"
    try:
        text = (node.explain() or "").strip().removeprefix("scons: ")
    except Exception:   # explain() is SCons' debugging aid; an odd node must not hide the answer
        text = ""
    if not text:
        return "its sources changed"
    parts = [ln.strip() for ln in text.splitlines() if ln.strip()]
    parts = [p if len(p) < 160 else p[:150] + " ...'" for p in parts]
    more = len(parts) - lines
    return "\n    ".join(parts[:lines]) + (f"\n    ... and {more} more" if more > 0 else "")
    _installed.append(True)
