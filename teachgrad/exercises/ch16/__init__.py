"""Checkers for chapter 16, *Profiling, CUDA graphs and memory*."""
from __future__ import annotations

from .memory import check_recompute  # noqa: F401
