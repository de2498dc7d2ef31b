"""The report as a table for people: one line per kernel (time, traffic, roofline fraction),
totals, and the few whole-model numbers worth a glance (each family's `summary.py`), plus the
MPI ranks. `swbuild report --json` prints the document itself; this reads only that
document, so both always agree.
"""
from __future__ import annotations

from ..backends import family_of_plan


def mpi_lines(doc):
    m = doc.get("model", {})
    lines = [f"MPI: {doc.get('ranks')} ranks, parallel {doc.get('parallel')}, batch {doc.get('batch')}"
             + (f"; modelled speed-up {m['speedup_over_one_core_group']:.2f}x over one core group"
                if "speedup_over_one_core_group" in m else "")]
    for r in doc.get("measured", {}).get("ranks", []):
        lines.append(f"  rank {r.get('rank')}: " + ", ".join(f"{k} {v}" for k, v in sorted(r.items())
                                                          if k != "rank" and not isinstance(v, (dict, list))))
    return lines


def format_report(rep) -> str:
    lines = family_of_plan(rep).summary.report_lines(rep)    # reports carry the plan's `family` convention
    if rep.get("mpi"):
        lines += mpi_lines(rep["mpi"])
    lines.append("(swbuild report --json prints every number of the document)")
    return "\n".join(lines)
