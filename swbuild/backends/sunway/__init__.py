"""Sunway family (SW26010 / SW26010-Pro, Athread v1 or CRTS).

pipeline.py lists the passes in order; cost/ holds the cost model and the exact DMA predictor;
schedule/ the kernel decisions (tiles, LDM, DMA boxes, loop order, SIMD, CPE partition, row
sharing); kinds/ the special kernels (Gather, convert, recurrence); passes/ the graph-level
passes (channel blocks, stitching, launches, prefetch); emit/ the C printers; mpi/ builds over
MPI ranks; outputs.py the generated files and the plan, report.py the build report. The
registry (backends/__init__.py) names them.
"""
