"""Where in the learner's code did this launch (or this wait) come from?

An asynchronous error surfaces later than the line that caused it, so the
queue remembers, for every op, the first line *outside* teachgrad that led to
it, and the autograd op (``Mul.forward``, ``Sum.backward``) it belongs to.
This is what makes a deferred error readable: CUDA itself only says that
"an illegal memory access was encountered", somewhere, some time ago.
"""
from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _inside_library(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or filename.startswith(_STDLIB)


def _where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"


def enqueue_site(skip: int = 1) -> tuple[str, str | None]:
    """``(site, op)``: the learner's line and the autograd op on the current call stack."""
    frame: FrameType | None = sys._getframe(skip)
    op = None
    while frame is not None:
        code = frame.f_code
        if op is None and code.co_name in ("forward", "backward") and "ctx" in code.co_varnames:
            op = code.co_qualname  # e.g. "Mul.forward": a Function's forward or backward
        if not _inside_library(code.co_filename):
            return _where(frame), op  # a learner's own Function counts as well
        frame = frame.f_back
    return "<teachgrad internals>", op


def wait_reason(skip: int = 1) -> tuple[str, str]:
    """``(reason, site)``: the outermost teachgrad call that had to wait, and the learner's line.

    A ``print(t)`` that waits reports ``Tensor.__repr__``; ``t.item()`` reports
    ``Tensor.item``; ``tg.cuda.synchronize()`` reports ``synchronize``.
    """
    frame: FrameType | None = sys._getframe(skip)
    reason = "synchronize"
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_PACKAGE):
            if not code.co_filename.startswith(_STDLIB):
                return reason, _where(frame)
        else:
            reason = code.co_qualname  # keep climbing: the outermost one names the request
        frame = frame.f_back
    return reason, "<teachgrad internals>"
