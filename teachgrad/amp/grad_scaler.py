"""``tg.amp.GradScaler``: loss scaling, so that small float16 gradients do not vanish.

float16's smallest positive number is about 6e-8: a gradient below it becomes 0.
Multiplying the loss by a large ``scale`` (65536 to start) multiplies every gradient
by it too, lifting the small ones into range. Before the optimizer uses them they are
divided by the scale again (``unscale_``), and checked: if any is inf or NaN the scale
was too large, so the step is skipped and the scale halved (``update``). After
``growth_interval`` steps in a row without overflow the scale doubles, to find the
largest scale that still fits. The semantics are PyTorch's, step for step.
"""
from __future__ import annotations

import math
from enum import Enum
from typing import Any

import numpy as np

from .. import dtypes
from ..autograd import parts
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, tensor


class _Stage(Enum):
    READY = 0     # nothing done since the last update()
    UNSCALED = 1  # unscale_() ran: the gradients are true gradients now
    STEPPED = 2   # step() ran (or skipped the step)


def _check_number(name: str, value: Any, ok: bool, need: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok:
        raise ValueError(f"GradScaler: {name} {need}, got {value!r}")
    return float(value)


class GradScaler:
    """Scale the loss, unscale and check the gradients, skip bad steps, adapt the scale.

    The usual loop::

        scaler = tg.amp.GradScaler("cpu")
        with tg.autocast("cpu", dtype=tg.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)          # optional: to clip the true gradients
        scaler.step(optimizer)              # skipped if a gradient is inf/NaN
        scaler.update()
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"GradScaler: device must be 'cpu' or 'cuda', got {device!r}")
        if not isinstance(enabled, bool):
            raise TypeError(f"GradScaler: enabled must be True or False, got {enabled!r}")
        self._init_scale = _check_number("init_scale", init_scale,
                                         isinstance(init_scale, (int, float)) and init_scale > 0,
                                         "must be a positive number")
        self._growth_factor = _check_number("growth_factor", growth_factor,
                                            isinstance(growth_factor, (int, float))
                                            and growth_factor > 1.0, "must be > 1.0")
        self._backoff_factor = _check_number("backoff_factor", backoff_factor,
                                             isinstance(backoff_factor, (int, float))
                                             and 0.0 < backoff_factor < 1.0, "must be in (0, 1)")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) \
                or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, "
                             f"got {growth_interval!r}")
        self._device = device
        self._enabled = enabled
        self._growth_interval = growth_interval
        # the scale is a float32 number, and grows/backs off in float32, as PyTorch's tensor
        self._scale: np.float32 | None = None  # made on the first scale()
        self._growth_tracker = 0
        self._stages: dict[int, _Stage] = {}       # id(optimizer) -> where it is in the step
        self._found_inf: dict[int, bool] = {}      # id(optimizer) -> whether unscale_ met inf/NaN

    # -- scaling the loss ----------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or a list/tuple of them) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = np.float32(self._init_scale)
        if isinstance(outputs, Tensor):
            # a 0-d float32 factor: a 16-bit loss stays 16-bit, as in PyTorch
            factor = tensor(float(self._scale), dtype=dtypes.float32, device=outputs.device)
            return outputs * factor
        if isinstance(outputs, (list, tuple)):
            return type(outputs)([self.scale(o) for o in outputs])
        raise TypeError(f"GradScaler.scale: expected a tensor or a list/tuple of tensors, "
                        f"got {type(outputs).__name__}")

    # -- unscaling and checking the gradients ---------------------------------------------
    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and note inf/NaN.

        Call it at most once per optimizer between ``update()`` calls, before clipping.
        """
        if not self._enabled:
            return
        self._check_scale_made("unscale_")
        stage = self._stages.get(id(optimizer), _Stage.READY)
        if stage is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update(). Fix: call it once per step, before step().")
        if stage is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step(). Fix: unscale_ first, "
                               "then step(), then update().")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        for g in grads:  # checked before any gradient changes
            if g.dtype is dtypes.float16:
                raise ValueError("Attempting to unscale FP16 gradients. Fix: keep the "
                                 "parameters in float32 and let autocast make the float16 "
                                 "copies (the gradients then arrive in float32).")
        # 1/scale in float64, rounded to float32 (as PyTorch's scale.double().reciprocal())
        inv_scale = float(np.float32(1.0 / np.float64(self._scale)))
        found_inf = False
        with no_grad(), np.errstate(invalid="ignore", over="ignore"):  # (inf is expected)
            for g in grads:
                if not bool(g.isfinite().all()):
                    found_inf = True
                g.mul_(inv_scale)  # (every gradient, as PyTorch's fused unscale does)
        self._found_inf[id(optimizer)] = found_inf
        self._stages[id(optimizer)] = _Stage.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()``, unless a gradient was inf or NaN (then nothing changes)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled. Fix: compute the loss before calling step().")
        self._check_scale_made("step")
        stage = self._stages.get(id(optimizer), _Stage.READY)
        if stage is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update(). "
                               "Fix: call update() after each step().")
        if not any(p.grad is not None for g in optimizer.param_groups for p in g["params"]):
            raise RuntimeError("No inf checks were recorded for this optimizer: none of its "
                               "parameters has a gradient. Fix: call backward() on the scaled "
                               "loss before step().")
        if stage is _Stage.READY:
            self.unscale_(optimizer)
        result = None
        if not self._found_inf[id(optimizer)]:
            result = optimizer.step(*args, **kwargs)
        self._stages[id(optimizer)] = _Stage.STEPPED
        return result

    # -- adapting the scale ------------------------------------------------------------
    def update(self, new_scale: Any = None) -> None:
        """Back off after an overflow, grow after ``growth_interval`` clean steps."""
        if not self._enabled:
            return
        self._check_scale_made("update")
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            self._scale = np.float32(_check_number("new_scale", value,
                                                   isinstance(value, (int, float)),
                                                   "must be a number or a one-element tensor"))
        else:
            if not self._found_inf:
                raise RuntimeError("No inf checks were recorded prior to update(). Fix: call "
                                   "step(optimizer) (or unscale_) before update().")
            self._scale, self._growth_tracker = update_scale(
                self._scale, self._growth_tracker, any(self._found_inf.values()),
                self._growth_factor, self._backoff_factor, self._growth_interval)
        self._stages.clear()
        self._found_inf.clear()

    def _check_scale_made(self, what: str) -> None:
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{what}: no loss was scaled yet. Fix: call "
                               "scaler.scale(loss).backward() first.")

    # -- reading and saving ------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled; ``init_scale`` before the first scale())."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """The scale and its rules, as PyTorch names them (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved: every entry is checked before any is used."""
        if not self._enabled:
            return
        if not isinstance(state_dict, dict):
            raise TypeError(f"GradScaler.load_state_dict: expected a dict, "
                            f"got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        expected = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                    "_growth_tracker"}
        if set(state_dict) != expected:
            raise KeyError(f"GradScaler.load_state_dict: expected the keys {sorted(expected)}, "
                           f"got {sorted(state_dict)}")
        checked = GradScaler(self._device, state_dict["scale"], state_dict["growth_factor"],
                             state_dict["backoff_factor"], state_dict["growth_interval"])
        tracker = state_dict["_growth_tracker"]
        if isinstance(tracker, bool) or not isinstance(tracker, int) or tracker < 0:
            raise ValueError(f"GradScaler.load_state_dict: _growth_tracker must be an int >= 0, "
                             f"got {tracker!r}")
        self._init_scale = checked._init_scale
        self._scale = np.float32(checked._init_scale)
        self._growth_factor = checked._growth_factor
        self._backoff_factor = checked._backoff_factor
        self._growth_interval = checked._growth_interval
        self._growth_tracker = tracker

    def __repr__(self) -> str:
        return (f"GradScaler(device={self._device!r}, scale={self.get_scale()}, "
                f"enabled={self._enabled})")


def next_scale(scale: np.float32, growth_tracker: int, found_inf: bool, growth_factor: float,
               backoff_factor: float, growth_interval: int) -> tuple[np.float32, int]:
    """PyTorch's update rule (``_amp_update_scale_``), in float32 as its scale tensor is.

    An overflow multiplies the scale by ``backoff_factor`` and restarts the count of
    clean steps; the ``growth_interval``-th clean step in a row multiplies it by
    ``growth_factor`` (unless that would overflow float32) and restarts the count. As in
    PyTorch's kernel, the product is taken in double precision (the factors are doubles)
    and stored back into the float32 scale.
    """
    if found_inf:
        return np.float32(float(scale) * backoff_factor), 0
    clean = growth_tracker + 1
    if clean == growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(float(scale) * growth_factor)
        return (grown if math.isfinite(grown) else scale), 0
    return scale, clean


UPDATE_SCALE = parts.declare(
    "amp.update_scale",
    receives="(scale, growth_tracker, found_inf, growth_factor, backoff_factor, "
             "growth_interval): the float32 scale as a float, the count of clean steps in a "
             "row, whether this step's gradients had an inf/NaN, and the scaler's settings",
    returns="(new_scale, new_growth_tracker): a positive number and an int >= 0",
    engine=next_scale)


def update_scale(scale: np.float32, growth_tracker: int, found_inf: bool, growth_factor: float,
                 backoff_factor: float, growth_interval: int) -> tuple[np.float32, int]:
    """The update rule GradScaler runs: the engine's :func:`next_scale`, or a learner's
    rule plugged into the part ``amp.update_scale`` (its answer checked, then stored in
    float32 as the scale always is)."""
    if UPDATE_SCALE.fn is None:
        return next_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                          growth_interval)
    got = UPDATE_SCALE.call(float(scale), growth_tracker, found_inf, growth_factor,
                            backoff_factor, growth_interval)
    ok = (isinstance(got, (tuple, list)) and len(got) == 2
          and isinstance(got[0], (int, float, np.floating)) and not isinstance(got[0], bool)
          and float(got[0]) > 0 and isinstance(got[1], (int, np.integer))
          and not isinstance(got[1], bool) and got[1] >= 0)
    if not ok:
        raise UPDATE_SCALE.reject(repr(got), UPDATE_SCALE.returns)
    return np.float32(got[0]), int(got[1])
