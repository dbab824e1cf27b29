"""``tg.linalg``, after ``torch.linalg``: the norms (``vector_norm``, ``matrix_norm``,
``norm``). The operations themselves are Functions in :mod:`teachgrad.ops.norms`."""
from __future__ import annotations

from .ops.norms import linalg_norm as norm, matrix_norm, vector_norm
from .unsupported import module_attribute_error

__all__ = ["norm", "matrix_norm", "vector_norm"]


def __getattr__(name: str):
    raise module_attribute_error(__name__, name)
