"""Learning-rate schedules, as ``torch.optim.lr_scheduler``.

A scheduler changes ``group["lr"]`` of an optimizer's parameter groups once
per ``scheduler.step()``, usually once per epoch, after ``optimizer.step()``::

    optimizer = tg.optim.SGD(model.parameters(), lr=0.1)
    scheduler = StepLR(optimizer, step_size=30, gamma=0.1)
    for epoch in range(100):
        train_one_epoch(...)            # calls optimizer.step()
        scheduler.step()

Each schedule is written as PyTorch writes it, as a rule that turns *this*
epoch's rate into the next one ("chainable"), so two schedulers on one
optimizer combine. The numbers match PyTorch's step for step (a recorded
fixture checks that).
"""
from __future__ import annotations

import math
import numbers
import types
import warnings
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable

from .optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available."
)


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return value


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    """Base class: keeps ``base_lrs``, ``last_epoch`` and the step logic; a subclass
    writes :meth:`get_lr` (the next rates) and, if it has one, ``_get_closed_form_lr``
    (the rates at ``last_epoch`` straight from ``base_lrs``)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        if not isinstance(last_epoch, int) or isinstance(last_epoch, bool) or last_epoch < -1:
            raise ValueError(f"last_epoch must be -1 (a fresh start) or the epoch to resume at, "
                             f"got {last_epoch!r}")
        if last_epoch != -1:  # resuming: the starting rates must have been saved
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                        "scheduler with last_epoch >= 0. Fix: load the optimizer's state_dict "
                        "first, or start with last_epoch=-1."
                    )
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True  # the first step, made here, sets the starting rates
        self.step()
        self._is_initial = False

    def get_lr(self) -> list[float]:
        """The rates for ``last_epoch``, from the current ones (the chainable rule)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates the last :meth:`step` set, one per parameter group."""
        return self._last_lr

    def _current(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self, epoch: int | None = None) -> None:
        """Move to the next epoch (or, deprecated, to ``epoch``) and set the groups' rates."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._current()

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (save the optimizer's own state next to it)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (checked first: nothing changes on error)."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be a dict, got {type(state_dict).__name__}")
        missing = [key for key in ("base_lrs", "last_epoch") if key not in state_dict]
        if missing:
            raise KeyError(f"{type(self).__name__}.load_state_dict: missing key(s) {missing}: "
                           "this is not a scheduler's state_dict")
        if len(state_dict["base_lrs"]) != len(self.optimizer.param_groups):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state has {len(state_dict['base_lrs'])}"
                f" learning rates but the optimizer has {len(self.optimizer.param_groups)} "
                "parameter groups"
            )
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``: any schedule you can write as a function.

    ``lr_lambda`` is one function for every group, or a list with one per group.
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != groups:
                raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
            lambdas = list(lr_lambda)
        else:
            lambdas = [lr_lambda] * groups
        for fn in lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda must be a function of the epoch, got {fn!r}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """As the base class, but a plain function cannot be saved: its entry is ``None``
        (a callable object's attributes are saved instead)."""
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = _positive_int("step_size", step_size)
        self.gamma = _number("gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each epoch listed in ``milestones``."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        milestones = list(milestones)
        if not all(isinstance(m, int) and not isinstance(m, bool) for m in milestones):
            raise TypeError(f"milestones must be epoch numbers (ints), got {milestones!r}")
        self.milestones = Counter(milestones)
        self.gamma = _number("gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._current()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)  # a loaded file gives a plain dict back


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = _number("gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Follow half a cosine from ``base_lr`` down to ``eta_min`` over ``T_max`` epochs
    (and back up over the next ``T_max``, as PyTorch's does)::

        lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = _positive_int("T_max", T_max)
        self.eta_min = _number("eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        # The chainable form of the formula above, step by step from the current rate,
        # exactly as PyTorch computes it (so the floating-point results agree too).
        low, t, period = self.eta_min, self.last_epoch, self.T_max
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and t > 0:  # resumed at epoch t: the closed form
            return [low + (base - low) * (1 + math.cos(t * math.pi / period)) / 2
                    for base in self.base_lrs]
        if (t - 1 - period) % (2 * period) == 0:  # at the bottom: turn back up
            return [lr + (base - low) * (1 - math.cos(math.pi / period)) / 2
                    for base, lr in zip(self.base_lrs, self._current())]
        ratio = (1 + math.cos(math.pi * t / period)) / (1 + math.cos(math.pi * (t - 1) / period))
        return [ratio * (lr - low) + low for lr in self._current()]

    def _get_closed_form_lr(self) -> list[float]:
        cosine = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


_LRScheduler = LRScheduler  # the old name, still used in tutorials
