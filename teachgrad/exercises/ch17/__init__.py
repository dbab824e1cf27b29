"""Checkers for chapter 17, *A tiny GPT, end to end*: one module per exercise."""
from __future__ import annotations

from .online_softmax import check_online_softmax  # noqa: F401
