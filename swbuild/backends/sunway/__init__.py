"""Sunway family (SW26010 / SW26010-Pro, Athread v1 or CRTS).

pipeline.py lists the passes in order; schedule/ holds the scheduling decisions (tiles, LDM,
DMA boxes, loop order, SIMD, CPE partition, row sharing), cost/ the cost model and the exact
DMA predictor, host.py / slave.py / scop_printer.py the C printers, outputs.py the generated
files and the plan, report.py the build report. The registry (backends/__init__.py) names them.
"""
