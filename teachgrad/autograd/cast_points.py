"""Where autocast looks at an operation made of several Functions (``cross_entropy``).

Most operations are one Function, and autocast sees them in ``Function._apply``. A
few public operations check their arguments' dtypes first (``matmul`` refuses two
different ones) or are built from several Functions (``cross_entropy`` is a
``log_softmax`` then an ``nll_loss``); PyTorch's autocast treats each as one
operation of its table. :func:`cast_point` marks such a function with its table
name, so autocast casts its arguments once, at the door, and leaves its insides alone.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from . import function


def cast_point(name: str) -> Callable[[Callable], Callable]:
    """Mark the public operation ``name`` (a name in ``teachgrad/amp/policy.py``'s tables)."""
    def mark(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def operation(*args: Any, **kwargs: Any) -> Any:
            policy = function.cast_policy
            if policy is None:  # autocast off: the operation as written
                return fn(*args, **kwargs)
            return policy.apply_named(name, fn, args, kwargs)
        return operation
    return mark
