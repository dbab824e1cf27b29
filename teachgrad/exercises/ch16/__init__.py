"""Checkers for chapter 16, *Profiling, CUDA graphs and memory*, one module per section."""
from .profiling import check_self_times

__all__ = ["check_self_times"]
