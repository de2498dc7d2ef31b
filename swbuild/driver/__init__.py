"""What each command does, from a model or a C file to files, programs and verdicts: compile,
lower, build steps, check, export, report text, ops report, MPI, weights file, SCoP driver."""
