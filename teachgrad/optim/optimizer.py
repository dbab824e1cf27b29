"""``Optimizer``: the base class that walks the parameters and keeps per-parameter state.

An optimizer holds ``param_groups`` (lists of parameters, each with its own
hyperparameters such as ``lr``) and ``state`` (a dict per parameter, e.g. the
momentum buffer). ``step()`` reads every ``param.grad`` and changes the
parameter in place. Subclasses write the update rule for one parameter in
:meth:`Optimizer.update_parameter`, which reads like the pseudo-code in
PyTorch's documentation.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any, Callable, Iterable

import teachgrad as tg
from teachgrad.autograd import parts
from teachgrad.nn.parameter import forget_grads
from teachgrad.tensor import Tensor

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]
State = dict[str, Any]  # one parameter's state, e.g. {"momentum_buffer": ...}
Group = dict[str, Any]  # one parameter group: {"params": [...], "lr": ..., ...}


class Optimizer:
    """Base class of every optimizer.

    Args:
        params: an iterable of tensors, or of dicts ``{"params": [...], "lr": ...}``
            (parameter groups; keys that a group leaves out come from ``defaults``).
        defaults: the hyperparameters every group starts from.
    """

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got a single Tensor. Fix: pass [tensor] or model.parameters()"
            )
        _reject_set(params)
        groups = list(params)
        if len(groups) == 0:
            raise ValueError(
                "optimizer got an empty parameter list. (A generator such as "
                "model.parameters() can only be used once.)"
            )
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (e.g. a smaller ``lr``)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"a parameter group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        _reject_set(params)
        params = list(params)
        for param in params:
            if not isinstance(param, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {type(param).__name__}"
                )
            if not param.is_leaf:
                raise ValueError(
                    "can't optimize a non-leaf Tensor (one made by an operation). "
                    "Fix: optimize the leaf it came from, or make a leaf with .detach().requires_grad_()"
                )
        if len({id(p) for p in params}) != len(params):
            raise ValueError(
                "a parameter appears twice in the same parameter group, so step() would "
                "update it twice. Fix: list each parameter once (e.g. list(dict.fromkeys(params)))"
            )
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in taken for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient: ``None`` (default) or zeros in place."""
        for group in self.param_groups:
            forget_grads(group["params"], set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()`` if given.

        ``closure`` recomputes the loss (zero_grad, forward, backward, return loss);
        some optimizers need it, these ones accept it for compatibility.
        """
        loss = None
        if closure is not None:
            with tg.enable_grad():
                loss = closure()
        updates = [(param, group) for group in self.param_groups
                   for param in group["params"] if param.grad is not None]
        for param, _ in updates:  # all or nothing: check every gradient before any update
            _check_grad(param)
        # The update itself is not part of any model: never record it.
        with tg.no_grad():
            for param, group in updates:
                self.update_parameter(param, param.grad, self.state[param], group)
        return loss

    def update_parameter(self, param: Tensor, grad: Tensor, state: State, group: Group) -> None:
        """Change ``param`` in place from its ``grad``; ``state`` persists between steps."""
        raise NotImplementedError(f"{type(self).__name__} must define update_parameter (or step)")

    # -- saving and loading ----------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are replaced by their position (0, 1, ...) over all groups, so the
        dict can be loaded into an optimizer built over a fresh copy of the model.
        """
        index_of: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = [index_of.setdefault(id(p), len(index_of)) for p in group["params"]]
            groups.append(packed)
        state = {index_of[id(p)]: s for p, s in self.state.items() if id(p) in index_of}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and state saved by :meth:`state_dict` (all or nothing)."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(saved_groups)} parameter groups, but the optimizer "
                f"has {len(self.param_groups)}"
            )
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't match the size of "
                    f"optimizer's group: group {i} has {len(saved['params'])} parameters saved, "
                    f"{len(group['params'])} here"
                )
        param_of = {
            index: param
            for saved, group in zip(saved_groups, self.param_groups)
            for index, param in zip(saved["params"], group["params"])
        }
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for index, saved_state in state_dict["state"].items():
            if index in param_of:
                param = param_of[index]
                new_state[param] = {
                    key: _copy_state_value(value, param) for key, value in saved_state.items()
                }
        self.state = new_state
        hyperparameters = [{k: v for k, v in saved.items() if k != "params"} for saved in saved_groups]
        self.param_groups = [
            dict(copy.deepcopy(saved), params=group["params"])
            for saved, group in zip(hyperparameters, self.param_groups)
        ]

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        lines.append(")")
        return "\n".join(lines)


def _check_grad(param: Tensor) -> None:
    """A gradient must have its parameter's shape, dtype and device (``p.data`` may have moved)."""
    grad = param.grad
    if (grad.shape, grad.dtype, grad.device) != (param.shape, param.dtype, param.device):
        raise RuntimeError(
            f"a parameter of shape {list(param.shape)} ({param.dtype}, {param.device}) has a "
            f"gradient of shape {list(grad.shape)} ({grad.dtype}, {grad.device}); nothing was "
            "updated. Fix: zero_grad() and run backward again after changing the parameter"
        )


#: PyTorch options that choose how an update is computed, not what it is.
_IMPLEMENTATION_OPTIONS = ("foreach", "fused", "capturable", "differentiable")


def check_options(name: str, options: dict[str, Any]) -> None:
    """Refuse PyTorch options teachgrad does not implement, naming them (falsy ones are fine)."""
    for key, value in options.items():
        if key not in _IMPLEMENTATION_OPTIONS:
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
        if value:
            raise TypeError(
                f"teachgrad does not support {name}({key}={value!r}): it has one plain "
                f"implementation of each update. Fix: leave out {key}="
            )


def _reject_set(params: Any) -> None:
    if isinstance(params, (set, frozenset)):
        raise TypeError(
            "optimizer parameters need to be organized in ordered collections, but the "
            "ordering of tensors in sets will change between runs. Please use a list instead."
        )


def _copy_state_value(value: Any, param: Tensor) -> Any:
    """A private copy of one saved state entry, on the parameter's device and dtype."""
    if isinstance(value, Tensor):
        dtype = param.dtype if value.dtype.is_floating_point else value.dtype
        return value.detach().to(device=param.device, dtype=dtype).clone()
    return copy.deepcopy(value)


def check_non_negative(name: str, value: float) -> None:
    """The constructor check every optimizer shares: ``Invalid learning rate: -1``."""
    if not value >= 0.0:
        raise ValueError(f"Invalid {name}: {value} (it must be >= 0)")


# --- an optimizer's update as a replaceable part (tg.exercises.plug("optim.sgd_step", ...)) --

def declare_step(name: str, engine: Callable, state_keys: str) -> parts.Part:
    """Declare the per-parameter update ``engine`` of an optimizer as the part ``name``."""
    return parts.declare(
        name, engine=engine,
        receives=f"(param, grad, state, group): the parameter, its gradient, its state dict "
                 f"(empty at the first step; keep {state_keys} there) and its group's "
                 "hyperparameters (group['lr'] ...), under no_grad",
        returns="the parameter's new value: a tensor shaped like param, of its dtype and "
                "device (or param itself, updated in place); the optimizer writes it into param")


def run_plugged_step(part: parts.Part, param: Tensor, grad: Tensor, state: State,
                     group: Group) -> None:
    """Run the learner's update for one parameter, check it, and write it into ``param``."""
    new = part.call(param, grad, state, group)
    if not isinstance(new, Tensor):
        raise part.reject(f"a {type(new).__name__}" + (
            " (did you update param in place and forget to return it?)" if new is None else ""),
            f"a tensor of shape {list(param.shape)}")
    if new.shape != param.shape or new.dtype is not param.dtype or new.device != param.device:
        raise part.reject(f"a {new.dtype} tensor of shape {list(new.shape)} on {new.device}",
                          f"{param.dtype}, shape {list(param.shape)}, on {param.device}, "
                          "as the parameter")
    if new is not param:
        param.copy_(new)

