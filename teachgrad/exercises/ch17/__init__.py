"""Checkers for chapter 17, *A tiny GPT, end to end*: one module per exercise.

17.1 attention from the engine's own operations (:mod:`.attention`), plugged into the
engine's multi-head attention; 17.2 the online softmax inside the tiled attention kernel
(:mod:`.online_softmax`); 17.3 loss scaling, GradScaler's update rule (:mod:`.scaling`)."""
from __future__ import annotations

from .attention import check_attention  # noqa: F401
from .online_softmax import check_online_softmax  # noqa: F401
from .scaling import check_update_scale  # noqa: F401
