"""Grad mode: whether operations record the graph (``no_grad`` and friends)."""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# One module-level flag, read on every operation; a plain global is the cheapest
# thing Python can look up, and teachgrad runs ops on one thread.
_enabled = True


def is_grad_enabled() -> bool:
    """True when new operations are being recorded for backward."""
    return _enabled


def _set(mode: bool) -> bool:
    global _enabled
    previous, _enabled = _enabled, bool(mode)
    return previous


class _GradMode:
    """Base of the three context managers; also usable as decorators."""

    mode = True

    def __new__(cls, *args: Any) -> Any:
        if cls is set_grad_enabled or not args:
            return super().__new__(cls)
        # a bare decorator (`@tg.no_grad`, no parentheses) passes the function itself
        if len(args) == 1 and callable(args[0]):
            return cls()(args[0])
        raise TypeError(
            f"{cls.__name__}() takes no arguments: use `with tg.{cls.__name__}():`, "
            f"`@tg.{cls.__name__}()` or `@tg.{cls.__name__}`"
        )

    def __enter__(self) -> None:
        self._previous = _set(self.mode)

    def __exit__(self, *exc: object) -> None:
        _set(self._previous)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            previous = _set(self.mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(previous)
        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    """Run without recording: results have no ``grad_fn`` and ``requires_grad=False``.

    Use it for parameter updates and evaluation::

        with tg.no_grad():
            w -= lr * w.grad
    """

    mode = False


class enable_grad(_GradMode):
    """Record again inside a ``no_grad`` block."""

    mode = True


class set_grad_enabled(_GradMode):
    """``set_grad_enabled(False)`` is ``no_grad()``; usable as a call, a block or a decorator."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        # like PyTorch, calling it (not only entering it) already switches the mode
        self._previous = _set(self.mode)

    def __enter__(self) -> None:
        pass

    def __call__(self, fn: F) -> F:
        # as a decorator it must not leave the mode switched: undo the call's switch
        _set(self._previous)
        return super().__call__(fn)


_inference = False


def is_inference_mode_enabled() -> bool:
    """True inside ``tg.inference_mode()``."""
    return _inference


class inference_mode(_GradMode):
    """``no_grad`` for code that will never want gradients (evaluation, serving), as a
    block or a decorator: ``with tg.inference_mode():``, ``@tg.inference_mode()``.

    ``inference_mode(False)`` switches it off again (and records, as in PyTorch).
    PyTorch also marks the tensors made inside as inference tensors, which autograd
    later refuses; teachgrad's are ordinary tensors that do not require grad.
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):  # a bare decorator: @tg.inference_mode
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode(mode) takes a bool, not {type(mode).__name__}")
        self.inference = mode
        self.mode = not mode  # grad mode: off inside inference mode

    def __enter__(self) -> None:
        global _inference
        self._previous_inference, _inference = _inference, self.inference
        super().__enter__()

    def __exit__(self, *exc: object) -> None:
        global _inference
        super().__exit__(*exc)
        _inference = self._previous_inference

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(self.inference):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
