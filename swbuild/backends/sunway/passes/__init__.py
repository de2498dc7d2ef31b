"""Graph-level passes of the Sunway family (listed in pipeline.py): channel blocks, buffer
stitching by recomputation, launches of a group, cross-kernel prefetch."""
