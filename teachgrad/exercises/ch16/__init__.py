"""Checkers for chapter 16, *Profiling, CUDA graphs and memory*, one module per section."""
from __future__ import annotations

from .devices import check_scatter_gather  # noqa: F401
from .graphs import check_train_with_graph  # noqa: F401
from .memory import check_recompute  # noqa: F401
from .profiling import check_self_times  # noqa: F401
