"""``tg.linalg``, after ``torch.linalg``: the norms (``vector_norm``, ``matrix_norm``,
``norm``) and ``svdvals``. The operations themselves are Functions in
:mod:`teachgrad.ops.norms` and :mod:`teachgrad.ops.singular_values`."""
from __future__ import annotations

from .ops.norms import linalg_norm as norm, matrix_norm, vector_norm
from .ops.singular_values import svdvals
from .unsupported import module_attribute_error

__all__ = ["norm", "matrix_norm", "vector_norm", "svdvals"]


def __getattr__(name: str):
    raise module_attribute_error(__name__, name)
