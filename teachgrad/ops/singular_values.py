"""Singular values, and the matrix norms made of them: ``'nuc'`` (their sum), ``2`` (the
largest) and ``-2`` (the smallest), as PyTorch builds them (``svdvals`` then ``sum``,
``amax`` or ``amin`` over the last dimension, so ties share the gradient as ``amax``'s do).

Every matrix ``A`` is ``U diag(s) Vᵀ`` with orthonormal columns in ``U`` and ``V``. Moving
``A`` by ``dA`` moves ``s_i`` by ``u_iᵀ dA v_i``, so the gradient of the singular values is
``U diag(grad) Vᵀ``: one outer product ``u_i v_iᵀ`` per value, weighted by its gradient.
That stays true where singular values repeat (PyTorch's ``svd_backward`` with only
``gS``), where the singular vectors themselves are not unique.

The decomposition itself is LAPACK's, through numpy: teachgrad has no SVD kernel, so on
``cuda`` the matrices travel to the host and the results back (counted as transfers).
"""
from __future__ import annotations

import numpy as np

from ..autograd.function import Context, Function
from ..tensor import Tensor

NON_FINITE = ("linalg.svd: The algorithm failed to converge because the input matrix "
              "contained non-finite values.")


class SingularValues(Function):
    """``(..., m, n)`` matrices to their ``min(m, n)`` singular values, largest first."""

    rule = "∂s/∂A = U diag(∂s) Vᵀ   (each value's singular vectors u_i v_iᵀ)"

    @staticmethod
    def forward(ctx: Context, a: Tensor):
        backend = ctx.backend
        host = backend.to_numpy(a._array)
        if not np.isfinite(host).all():
            raise RuntimeError(NON_FINITE + " Fix: look for inf or NaN in the input")
        u, s, vh = np.linalg.svd(host, full_matrices=False)
        ctx.u, ctx.vh = backend.from_numpy(u), backend.from_numpy(vh)
        return backend.from_numpy(s)

    @staticmethod
    def backward(ctx: Context, grad: Tensor):
        u = Tensor._make(ctx.u, ctx.backend, grad.device)
        vh = Tensor._make(ctx.vh, ctx.backend, grad.device)
        return u.matmul(grad.unsqueeze(-1) * vh)  # U diag(grad) Vᵀ


def svdvals(A: Tensor) -> Tensor:
    """``tg.linalg.svdvals``: the singular values of each matrix in the last two dims of
    ``A``, largest first (``min(m, n)`` of them), with gradients."""
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.svdvals(): argument 'A' (position 1) must be Tensor, not "
                        f"{type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.svd: The input tensor A must have at least 2 dimensions. "
                           f"Got {A.ndim}D. Fix: a vector's only singular value is its norm")
    _check_float(A, "linalg.svd")
    return SingularValues.apply(A)


def _check_float(A: Tensor, name: str) -> None:
    if A.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {A.dtype}. "
                           "Fix: convert first, e.g. A.float()")


def singular_value_norm(A: Tensor, ord: object, rows: int, cols: int, keepdim: bool) -> Tensor:
    """``matrix_norm`` for ``ord`` in ``'nuc'``, 2, -2 over the dims ``rows``, ``cols``."""
    _check_float(A, "linalg.matrix_norm")
    if A.shape[rows] == 0 or A.shape[cols] == 0:  # no singular values: the norm is 0
        return (A * 0).sum(dim=(rows, cols), keepdim=keepdim)
    others = [d for d in range(A.ndim) if d not in (rows, cols)]
    values = SingularValues.apply(A.permute(*others, rows, cols))
    if ord == "nuc":
        out = values.sum(dim=-1)
    else:
        out = values.amax(dim=-1) if ord == 2 else values.amin(dim=-1)
    if keepdim:
        for d in sorted((rows, cols)):
            out = out.unsqueeze(d)
    return out
