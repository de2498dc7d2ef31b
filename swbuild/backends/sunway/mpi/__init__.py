"""A Sunway build over MPI ranks: render.py (data parallel entry, header, runner) and
pipeline.py (stages on consecutive ranks)."""
