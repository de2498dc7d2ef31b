"""The `report` and `report-<model>` aliases print the report: the table `swbuild report`
prints, or with `json=1` the JSON document on one line.

The run itself is the target <prefix>.report.json (up to date while the runner is), so a
second `scons report` runs nothing; the alias then prints the table from that file, and
when the file was just written the REPORT command printed it already.
"""
from __future__ import annotations

import json
import sys

import SCons.Node
import SCons.Script
from SCons.Action import Action


def format_flag(env):
    """`--json` for the CLI's report command when json=1; the table otherwise."""
    return "--json" if _json(env) else ""


def _json(env):
    return str(env.get("json", "")).lower() in ("1", "true", "yes", "on")


def _show(target, source, env):
    from swbuild.driver.report_text import format_report
    for node in source:
        if node.get_state() == SCons.Node.executed:
            continue    # its command printed it a moment ago
        doc = json.loads(node.get_text_contents())
        sys.stdout.write((json.dumps(doc, sort_keys=True) if _json(env) else format_report(doc)) + "\n")
    sys.stdout.flush()
    return 0


def add_report_alias(env, model, report):
    """Alias report-<model> (and report) to the report file, printing it each time asked."""
    alias = env.Alias(f"report-{model}", report, Action(_show, strfunction=lambda *a, **k: None))
    if not SCons.Script.GetOption("question"):     # scons -q report: only whether it is up to date
        env.AlwaysBuild(alias)
    env.Alias("report", alias)
    return alias
