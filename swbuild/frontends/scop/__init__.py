"""C SCoP frontend: the `#pragma scop` regions of an ordinary C file as a polyhedral model.

Extraction only (PPCG's first step): preprocess with the target's own preprocessor
(`cparse`), parse the whole translation unit with pycparser, find the regions (`extract`),
and describe every statement by an iteration domain, access relations and a 2d+1 source
schedule in isl syntax (`builder`, into the dataclasses of `model`). Dependences, mapping,
tiling and copies live in swbuild.optimizer.polyhedral; printing in
swbuild.backends.sunway.emit.scop_printer.
"""
from .cparse import GNU_DEFINES, parse, preprocess, reduce_system_headers
from .extract import extract
from .model import ELEM_SIZES, INT_TYPES, MATH_FUNCS, Access, Array, Region, ScopError, Stmt

__all__ = ["GNU_DEFINES", "parse", "preprocess", "reduce_system_headers", "extract", "ELEM_SIZES",
           "INT_TYPES", "MATH_FUNCS", "Access", "Array", "Region", "ScopError", "Stmt"]
