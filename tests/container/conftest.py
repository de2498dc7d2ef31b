"""Timings of the container tests' stages, printed in pytest's terminal summary.

The tests attach ("container-timing", [stage, seconds]) to their reports' user_properties,
which pytest-xdist carries from the workers to the controller that prints the summary.
"""
KEY = "container-timing"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    seen, rows = set(), []
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for name, value in getattr(rep, "user_properties", ()) or ():
                if name != KEY:
                    continue
                what, seconds = value
                key = (getattr(rep, "nodeid", ""), what, seconds)
                if key not in seen:
                    seen.add(key)
                    rows.append((what, seconds))
    if rows:
        terminalreporter.section("container stage timings")
        for what, seconds in rows:
            terminalreporter.write_line(f"{seconds:8.1f} s  {what}")
