"""DianNao family (Cambricon MLU, BANG C): pipeline.py (the passes, in order), outputs.py
(generated files, plan), printer.py (BANG C), report.py (the build report).

    fuse epilogues → storage layouts (NHWC around convolutions, identity copies removed)
    → static arena → work split and staging (schedule) → loop partitioning (Algorithm 2,
    option `partition`) → pre-processing of what is left (Algorithm 1: extra computation,
    padded lengths) → instruction mapping (ISA Mapper) → BANG C.

See docs/diannao.md.
"""
