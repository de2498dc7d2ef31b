"""Sunway cost model (model.py) and the exact DMA predictor (predict.py)."""
