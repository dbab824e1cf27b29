"""Checkers for chapter 16, *Profiling, CUDA graphs and memory*, one module per section."""
from .devices import check_scatter_gather  # noqa: F401
