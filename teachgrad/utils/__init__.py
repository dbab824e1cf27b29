"""``tg.utils``: helpers around the engine, spelt as in ``torch.utils``.

Each subpackage loads on first use (``tg.utils.data``, ``tg.utils.tensorboard``,
``tg.utils.checkpoint``).
"""
from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name in ("data", "tensorboard", "checkpoint"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'teachgrad.utils' has no attribute {name!r}")
