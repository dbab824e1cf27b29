"""Making new tensors: ``zeros``, ``ones``, ``arange``, ``randn``, ... (PyTorch's names)."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from . import random as _random
from .backends import get_backend
from .cuda_devices import using
from .device import as_device
from .tensor import Tensor, tensor
from .tensor_data import check_flag as _check_flag


def _shape(size: tuple) -> tuple[int, ...]:
    """Sizes as ``f(2, 3)`` or ``f((2, 3))``; ints or anything int-like (a 0-d int tensor)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, (bool, float)) or not hasattr(s, "__index__"):
            raise TypeError(f"sizes must be integers, got {s!r} ({type(s).__name__}) in "
                            f"{list(size)}. Fix: pass whole numbers, e.g. tg.zeros(2, 3)")
    shape = tuple(s.__index__() for s in size)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}. "
                           "Fix: sizes must be >= 0")
    return shape


def _finish(array: Any, device: Any, requires_grad: bool, on_host: bool = True) -> Tensor:
    _check_flag("requires_grad", requires_grad)
    dev = as_device(device)
    backend = get_backend(dev.type)
    if on_host:
        with using(dev.index):  # the copy goes to that device's stream
            array = backend.from_numpy(array)
    t = Tensor._make(array, backend, dev)
    return t.requires_grad_(True) if requires_grad else t


def _float(dtype: Any) -> dtypes.DType:
    return dtypes.get_default_dtype() if dtype is None else dtypes.get_dtype(dtype)


def full(size: Any, fill_value: float, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    if not isinstance(fill_value, (int, float, bool, np.number, np.bool_)):
        raise TypeError(f"full(): fill_value must be a number, not {type(fill_value).__name__}")
    if dtype is None:
        dtype = dtypes.bool_ if isinstance(fill_value, bool) else (
            dtypes.int64 if isinstance(fill_value, int) else dtypes.get_default_dtype())
    dt = dtypes.get_dtype(dtype)
    dev = as_device(device)
    with using(dev.index):  # the fill kernel runs on that device
        array = get_backend(dev.type).full(_shape(size if isinstance(size, tuple) else (size,)),
                                           fill_value, dt.numpy)
    return _finish(array, dev, requires_grad, on_host=False)


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return full(_shape(size), 0, dtype=_float(dtype), device=device, requires_grad=requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return full(_shape(size), 1, dtype=_float(dtype), device=device, requires_grad=requires_grad)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Like PyTorch's ``empty`` but filled with zeros (teachgrad never hands out garbage)."""
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(t: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return zeros(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                 requires_grad=requires_grad)


def ones_like(t: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return ones(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: float, *, dtype: Any = None, device: Any = None) -> Tensor:
    return full(tuple(t.shape), fill_value, dtype=dtype or t.dtype, device=device or t.device)


def arange(start: float, end: float | None = None, step: float = 1, *, dtype: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: start, end and step must be numbers, got {v!r}")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step}). Fix: e.g. arange(5, 0, -1)")
    if dtype is None:
        is_int = all(isinstance(v, int) for v in (start, end, step))
        dtype = dtypes.int64 if is_int else dtypes.get_default_dtype()
    array = np.arange(start, end, step).astype(dtypes.get_dtype(dtype).numpy)
    return _finish(array, device, requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    array = np.linspace(start, end, steps).astype(_float(dtype).numpy)
    return _finish(array, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"eye: n and m must be greater or equal to 0, got n={n}, m={m}")
    return _finish(np.eye(n, m, dtype=_float(dtype).numpy), device, requires_grad)


def _check_int(name: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}(): argument '{what}' must be an int, not "
                        f"{type(value).__name__} {value!r}")
    return value.__index__()


def rand(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
         generator: Any = None) -> Tensor:
    """Uniform on [0, 1); ``generator=`` a ``tg.Generator`` instead of the global stream."""
    array = _random.uniform_array(_shape(size), 0.0, 1.0, _float(dtype), generator)
    return _finish(array, device, requires_grad)


def randn(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
          generator: Any = None) -> Tensor:
    """Standard normal; ``generator=`` a ``tg.Generator`` instead of the global stream."""
    array = _random.normal_array(_shape(size), 0.0, 1.0, _float(dtype), generator)
    return _finish(array, device, requires_grad)


def randint(low: int | None = None, high: int | None = None, size: tuple = (), *,
            dtype: Any = None, device: Any = None, generator: Any = None,
            requires_grad: bool = False) -> Tensor:
    """Integers uniform on [low, high) (int64 unless ``dtype``): ``randint(high, size)`` or
    ``randint(low, high, size)``, as in PyTorch (``low`` is 0 when left out)."""
    if low is None:  # randint(high=10, size=(3,))
        low = 0
    elif high is None or isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, (size if high is None else high)
    low, high = _check_int("randint", "low", low), _check_int("randint", "high", high)
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be a tuple of ints, not "
                        f"{type(size).__name__}. Fix: e.g. tg.randint(0, 10, (3,))")
    shape = _shape(tuple(size))
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}. Fix: randint(low, high, size) draws from [low, high)")
    want = dtypes.int64 if dtype is None else dtypes.get_dtype(dtype)
    if requires_grad and not want.is_floating_point:
        raise RuntimeError("Only Tensors of floating point dtype can require gradients. "
                           "Fix: pass dtype=tg.float32 or leave out requires_grad")
    array = _random.integers_array(shape, low, high, generator).astype(want.numpy)
    return _finish(array, device, requires_grad)


def randperm(n: int, *, dtype: Any = None, device: Any = None, generator: Any = None,
             requires_grad: bool = False) -> Tensor:
    """0, ..., n-1 in random order (int64 unless ``dtype``)."""
    n = _check_int("randperm", "n", n)
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got {n}")
    want = dtypes.int64 if dtype is None else dtypes.get_dtype(dtype)
    array = _random.permutation(n, generator).astype(want.numpy)
    return _finish(array, device, requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """A cpu tensor with ``a``'s values and dtype (copied: teachgrad owns its arrays)."""
    return tensor(a)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    if isinstance(data, Tensor):
        return data.to(device=device or data.device, dtype=dtype or data.dtype)
    return tensor(data, dtype=dtype, device=device)
