"""Checkers for chapter 16, *Profiling, CUDA graphs and memory*."""
from __future__ import annotations

from .graphs import check_train_with_graph  # noqa: F401
