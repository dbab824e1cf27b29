"""Checkers for chapter 17, *A tiny GPT, end to end*: attention from the engine's own
operations (17.1, :mod:`.attention`), plugged into the engine's multi-head attention."""
from .attention import check_attention  # noqa: F401
