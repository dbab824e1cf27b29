"""``gradcheck``: does a backward agree with the slope you can measure?

The derivative of ``f`` at ``x`` along one coordinate is approximately the
central difference ``(f(x + eps) - f(x - eps)) / (2 eps)``. Doing that for every
input element gives the *numerical* Jacobian. Running backward once per output
element, with a gradient that is 1 at that element and 0 elsewhere, gives the
*analytical* Jacobian, one row at a time. If the two agree, the backward is
right (at this point, up to the tolerance).

Use float64 inputs: in float32 the rounding error of ``f`` swamps the tiny
differences, and the check fails for correct code.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ..backends import get_backend
from . import function, grad_mode


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when the two Jacobians disagree."""


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _float_outputs(outputs: tuple) -> list[int]:
    return [i for i, o in enumerate(outputs)
            if isinstance(o, function.Tensor) and o.dtype.is_floating_point]


def _tensor_like(values: np.ndarray, like: Any) -> Any:
    """A new tensor holding ``values`` with ``like``'s dtype and device (``tg.tensor``'s work,
    done here with the Tensor class the engine was given: autograd sits below ``tensor``)."""
    backend = get_backend(like.device.type)
    array = np.asarray(values, dtype=like.dtype.numpy, order="C")
    return function.Tensor._make(backend.from_numpy(array), backend, like.device)


def _replace(inputs: tuple, i: int, values: np.ndarray) -> tuple:
    """The inputs with input ``i`` replaced by a fresh tensor holding ``values``."""
    new = _tensor_like(values, inputs[i])
    return inputs[:i] + (new,) + inputs[i + 1:]


def numerical_jacobian(fn: Callable, inputs: tuple, i: int, out: int, eps: float) -> np.ndarray:
    """d output[out] / d input[i] by central differences: shape (output size, input size)."""

    def output_at(values: np.ndarray) -> np.ndarray:
        result = _as_tuple(fn(*_replace(inputs, i, values)))[out]
        return result.detach()._host().astype(np.float64).reshape(-1)

    base = inputs[i].detach()._host().astype(np.float64)
    with grad_mode.no_grad():
        n_out = output_at(base).size
        jacobian = np.zeros((n_out, base.size))
        for j in range(base.size):
            up, down = base.copy(), base.copy()
            up.flat[j] += eps
            down.flat[j] -= eps
            jacobian[:, j] = (output_at(up) - output_at(down)) / (2 * eps)
    return jacobian


def analytical_jacobian(fn: Callable, inputs: tuple, wanted: Sequence[int],
                        out: int) -> dict[int, np.ndarray]:
    """d output[out] / d input[i] for each ``i`` in ``wanted``, one backward per output element."""
    output = _as_tuple(fn(*inputs))[out]
    n_out = output.numel()
    rows: dict[int, list] = {i: [] for i in wanted}
    for k in range(n_out):
        for i in wanted:
            inputs[i].grad = None
        if output.requires_grad:
            seed = np.zeros(n_out)
            seed[k] = 1.0
            seed_t = _tensor_like(seed.reshape(tuple(output.shape)), output)
            output.backward(seed_t, retain_graph=True)
        for i in wanted:
            g = inputs[i].grad
            row = np.zeros(inputs[i].numel()) if g is None else g._host().astype(np.float64).reshape(-1)
            rows[i].append(row)
    return {i: np.stack(r) if r else np.zeros((0, inputs[i].numel())) for i, r in rows.items()}


def gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare the gradients from backward with central differences, like
    ``torch.autograd.gradcheck``.

    Args:
        fn: takes the inputs, returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of arguments; the tensors with
            ``requires_grad=True`` are checked (use float64 for them).
        eps: the step of the central differences.
        atol, rtol: an entry passes when ``|analytical - numerical| <= atol + rtol * |numerical|``.
        raise_exception: raise :class:`GradcheckError` on a mismatch (else return False).

    Returns:
        True when every Jacobian agrees. The inputs' ``.grad`` are left as they were.
    """
    inputs = _as_tuple(inputs)
    wanted = [i for i, t in enumerate(inputs) if isinstance(t, function.Tensor) and t.requires_grad]
    if not wanted:
        raise ValueError("gradcheck expects at least one input tensor with requires_grad=True")
    for i in wanted:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"input {i} of gradcheck is {inputs[i].dtype}, not float64: central differences "
                "are too imprecise in lower precision, so the check may fail for correct code",
                stacklevel=2,
            )
    saved_grads = [inputs[i].grad for i in wanted]
    try:
        for out in _float_outputs(_as_tuple(fn(*inputs))):
            analytical = analytical_jacobian(fn, inputs, wanted, out)
            for i in wanted:
                numerical = numerical_jacobian(fn, inputs, i, out, eps)
                close = np.abs(analytical[i] - numerical) <= atol + rtol * np.abs(numerical)
                if not np.all(close):
                    message = (
                        f"Jacobian mismatch for output {out} with respect to input {i},\n"
                        f"numerical:\n{numerical}\nanalytical:\n{analytical[i]}\n"
                        "The backward of one of the operations does not match the slope of its "
                        "forward at this point."
                    )
                    low = [j for j in wanted if inputs[j].dtype.name != "float64"]
                    if low:
                        message += (f"\nBut input(s) {low} are not float64: in lower precision "
                                    "central differences are too imprecise to judge. Fix: pass "
                                    "the inputs as float64 (tg.tensor(..., dtype=tg.float64)).")
                    if raise_exception:
                        raise GradcheckError(message)
                    return False
    finally:
        for i, g in zip(wanted, saved_grads):
            inputs[i].grad = g
    return True
