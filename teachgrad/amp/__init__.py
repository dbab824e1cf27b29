"""Mixed precision: ``autocast`` (a cast policy per operation) and ``GradScaler``.

``tg.autocast`` and ``tg.amp.autocast`` are the same class, as in PyTorch.
"""
from __future__ import annotations

from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]
