"""Checkers for chapter 17, *A tiny GPT, end to end*: loss scaling (17.3, :mod:`.scaling`)."""
from __future__ import annotations

from .scaling import check_update_scale  # noqa: F401
