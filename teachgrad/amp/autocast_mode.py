"""``tg.autocast``: a cast policy applied as each operation is dispatched.

Inside ``with tg.autocast("cpu", dtype=tg.bfloat16):`` every operation on cpu tensors
first looks itself up in ``policy.py``'s table: a matrix product gets its float32
inputs cast to bfloat16, a loss gets its bfloat16 inputs cast to float32. The model's
parameters stay float32; only the copies an operation computes with are 16-bit, and
the casts are differentiable, so gradients arrive in the parameters' own dtype.

The engine knows nothing of this module: entering the first autocast region sets
``autograd.function.cast_policy`` (the seam ``Function._apply`` tests), leaving the
last one unsets it, so with autocast off an operation pays one test of a global.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .. import dtypes
from ..autograd import function
from ..tensor import Tensor
from . import policy

_DEFAULT_DTYPE = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}


class _CastPolicy:
    """The object ``Function._apply`` hands operations to while autocast is on."""

    def __init__(self) -> None:
        self.dtypes: dict[str, dtypes.DType] = {}  # device type -> autocast's dtype there

    def apply(self, cls: type, args: tuple, kwargs: dict) -> Any:
        """Run Function ``cls`` on ``args`` cast as its table entry says."""
        return self._run(policy.FUNCTION_NAMES.get(cls), cls._apply, args, kwargs)

    def apply_named(self, name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """Run the public operation ``fn`` (``name`` in the tables) the same way."""
        return self._run(name, fn, args, kwargs)

    def _run(self, name: str | None, fn: Callable, args: tuple, kwargs: dict) -> Any:
        # the casts and the operation's own insides run with autocast off (a Cast is an
        # operation too, and an operation of the table casts once, at its door)
        function.cast_policy = None
        try:
            device_type = _device_type(args)
            rule = policy.rule_for(device_type, name) if device_type in self.dtypes else None
            if rule is not None:
                args = _cast_all(args, rule, self.dtypes[device_type])
                kwargs = {k: _cast_all((v,), rule, self.dtypes[device_type])[0]
                          for k, v in kwargs.items()}
            return fn(*args, **kwargs)
        finally:
            function.cast_policy = self


_POLICY = _CastPolicy()


def _tensors(args: Any) -> list[Tensor]:
    """The tensors among ``args`` (one level into lists and tuples: ``cat``'s list)."""
    found = []
    for a in args:
        if isinstance(a, Tensor):
            found.append(a)
        elif type(a) in (list, tuple):
            found += [x for x in a if isinstance(x, Tensor)]
    return found


def _device_type(args: tuple) -> str | None:
    tensors = _tensors(args)
    return tensors[0].device.type if tensors else None


def _eligible(t: Any) -> bool:
    """Only float32 and 16-bit tensors are cast (float64 and integers never are, as in PyTorch)."""
    return isinstance(t, Tensor) and t.dtype.is_floating_point and t.dtype is not dtypes.float64


def _cast_all(args: tuple, rule: str, low: dtypes.DType) -> tuple:
    """``args`` with each eligible tensor cast to the dtype ``rule`` asks for."""
    if rule == policy.LOWER:
        target = low
    elif rule == policy.FLOAT32:
        target = dtypes.float32
    else:  # PROMOTE: the widest floating-point dtype among the tensors
        target = None
        for t in _tensors(args):
            if _eligible(t):
                target = t.dtype if target is None else dtypes.promote_types(target, t.dtype)
    if target is None:
        return args
    return tuple([_cast(a, target) for a in args])


def _cast(a: Any, target: dtypes.DType) -> Any:
    if type(a) in (list, tuple):
        return type(a)([_cast(x, target) for x in a])
    if _eligible(a) and a.dtype is not target:
        return a.to(target)
    return a


def _check(device_type: Any, dtype: Any, enabled: Any) -> dtypes.DType:
    """autocast's arguments, checked before anything changes; returns the dtype."""
    if device_type not in _DEFAULT_DTYPE:
        raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}. "
                         "Fix: e.g. tg.autocast('cpu', dtype=tg.bfloat16)")
    if not isinstance(enabled, bool):
        raise TypeError(f"autocast: enabled must be True or False, got {enabled!r}")
    if dtype is None:
        return _DEFAULT_DTYPE[device_type]
    try:
        dtype = dtypes.get_dtype(dtype)
    except TypeError:
        dtype = None
    if dtype not in dtypes.LOW_PRECISION:
        raise ValueError(f"autocast: dtype must be tg.float16 or tg.bfloat16, got {dtype!r}. "
                         "Fix: e.g. tg.autocast('cpu', dtype=tg.bfloat16)")
    if device_type == "cuda" and dtype is dtypes.bfloat16:
        raise ValueError("autocast: teachgrad's cuda device has no bfloat16 (numba has no such "
                         "type). Fix: tg.autocast('cuda', dtype=tg.float16)")
    return dtype


class autocast:  # noqa: N801  (named as torch.autocast)
    """Run the operations inside in mixed precision (a context manager or a decorator).

    ``device_type`` is ``"cpu"`` or ``"cuda"`` (only operations on that device are
    cast); ``dtype`` defaults to bfloat16 on cpu and float16 on cuda, as in PyTorch;
    ``enabled=False`` turns autocast off inside (regions nest, the inner one wins).
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: Any = None) -> None:
        self.fast_dtype = _check(device_type, dtype, enabled)
        self.device = device_type
        self._enabled = enabled
        self._saved: list[dtypes.DType | None] = []  # the state outside, one per entry

    def __enter__(self) -> "autocast":
        self._saved.append(_POLICY.dtypes.get(self.device))
        if self._enabled:
            _POLICY.dtypes[self.device] = self.fast_dtype
        else:
            _POLICY.dtypes.pop(self.device, None)
        _install()
        return self

    def __exit__(self, *exc: Any) -> None:
        outside = self._saved.pop()
        if outside is None:
            _POLICY.dtypes.pop(self.device, None)
        else:
            _POLICY.dtypes[self.device] = outside
        _install()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def with_autocast(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)
        return with_autocast


def _install() -> None:
    """Set the engine's seam while some device has autocast on, unset it otherwise."""
    function.cast_policy = _POLICY if _POLICY.dtypes else None


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for ``device_type`` here (no argument means cuda, as in PyTorch)."""
    if device_type not in _DEFAULT_DTYPE:
        raise ValueError(f"is_autocast_enabled: device_type must be 'cpu' or 'cuda', "
                         f"got {device_type!r}")
    return device_type in _POLICY.dtypes


def get_autocast_dtype(device_type: str) -> dtypes.DType:
    """The dtype autocast casts to on ``device_type`` (its default when it is off)."""
    if device_type not in _DEFAULT_DTYPE:
        raise ValueError(f"get_autocast_dtype: device_type must be 'cpu' or 'cuda', "
                         f"got {device_type!r}")
    return _POLICY.dtypes.get(device_type, _DEFAULT_DTYPE[device_type])
