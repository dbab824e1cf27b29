"""Exercise checkers for the chapters: friendly, specific feedback on the learner's code.

Each chapter has a module (``teachgrad.exercises.ch03`` ...) with one checker
per exercise; :mod:`.core` is the machinery they share, and :mod:`.edition`
turns a reference notebook into the learner edition.

    from teachgrad.exercises import ch03
    ch03.check_square_backward(square_backward)
"""
from .core import (
    ERROR, NOT_SOLVED_YET, SOLVED, WRONG, Case, Feedback, Mismatch, Test, check,
    check_function, describe, expect_close, expect_equal, expect_true, numerical_gradient,
    to_numpy,
)
from .plugging import Part, PartError, parts, plug, plugged, plugged_parts, unplug
from .catalog import KINDS, Exercise, Progress, catalog, progress  # noqa: E402  (uses plugging)

__all__ = [
    "Case", "Feedback", "Mismatch", "Test", "check", "check_function", "describe",
    "expect_close", "expect_equal", "expect_true", "numerical_gradient", "to_numpy",
    "SOLVED", "NOT_SOLVED_YET", "WRONG", "ERROR",
    "Part", "PartError", "parts", "plug", "plugged", "plugged_parts", "unplug",
    "KINDS", "Exercise", "Progress", "catalog", "progress",
]
