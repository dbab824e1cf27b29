"""LayerStats: what each layer's activations and gradients do over training, from hooks.

::

    stats = LayerStats(model)            # hooks on every layer (modules without children)
    for step in range(steps):
        loss = loss_fn(model(X), y)
        opt.zero_grad(); loss.backward()
        stats.step()                     # one row per layer for this step
        opt.step()
    display(stats)
    stats.remove()                       # take the hooks off again

Per layer and step: the mean and std of its output, the fraction of dead units
(ReLU outputs that are 0 for every example in the batch), the norm of the
gradient arriving at its output, and the norm of its parameters' gradients.
Vanishing gradients show up as norms shrinking layer by layer towards the
input; exploding ones as norms growing; a dead network as a dead fraction of 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets
import numpy as np

import teachgrad as tg
from teachgrad import nn

from ._chart import Panel
from ._display import StaticSVG
from ._format import to_host
from ._svg import PALETTE, document

PANEL_W, PANEL_H = 300, 170
METRICS = {
    "grad_norm": ("gradient norm at the output", True),
    "weight_grad_norm": ("parameter gradient norm", True),
    "act_std": ("activation std", False),
    "dead_fraction": ("dead ReLU fraction", False),
}


@dataclass
class LayerStep:
    """One layer at one step (NaN where there was nothing to measure)."""

    step: int
    act_mean: float = math.nan
    act_std: float = math.nan
    dead_fraction: float = math.nan  # ReLU layers only
    grad_mean: float = math.nan
    grad_std: float = math.nan
    grad_norm: float = math.nan
    weight_grad_norm: float = math.nan  # layers with parameters only


def _norm(a: np.ndarray) -> float:
    return float(np.sqrt(np.sum(np.square(a, dtype=np.float64))))


class LayerStats(StaticSVG, widgets.HTML):
    """Per-layer activation and gradient statistics, gathered with module hooks."""

    def __init__(self, model: nn.Module, layers: dict[str, nn.Module] | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"LayerStats watches an nn.Module, got {type(model).__name__}")
        super().__init__()
        if layers is None:  # the leaves of the module tree: Linear, ReLU, ...
            layers = {name: m for name, m in model.named_modules()
                      if name and not any(True for _ in m.children())}
        if not layers:
            raise ValueError("LayerStats found no layers to watch: pass layers={'name': module}")
        self.layers = layers
        self.history: dict[str, list[LayerStep]] = {name: [] for name in layers}
        self._current: dict[str, LayerStep] = {}
        self._steps = 0
        self._handles = []
        for name, module in layers.items():
            self._handles.append(module.register_forward_hook(self._forward_hook(name)))
            self._handles.append(module.register_full_backward_hook(self._backward_hook(name)))
        self.value = self.to_svg()

    def _row(self, name: str) -> LayerStep:
        return self._current.setdefault(name, LayerStep(self._steps))

    def _forward_hook(self, name: str) -> Any:
        def record_activation(module: nn.Module, args: tuple, output: Any) -> None:
            if not tg.is_grad_enabled() or not isinstance(output, tg.Tensor):
                return  # evaluation passes are not part of the training step
            a = to_host(output)
            row = self._row(name)
            row.act_mean, row.act_std = float(a.mean()), float(a.std())
            if isinstance(module, nn.ReLU) and a.ndim >= 2:
                # a unit is dead when it is 0 for every example of the batch
                row.dead_fraction = float(np.mean(np.all(a.reshape(a.shape[0], -1) <= 0, axis=0)))
        return record_activation

    def _backward_hook(self, name: str) -> Any:
        def record_gradient(module: nn.Module, grad_input: tuple, grad_output: tuple) -> None:
            if grad_output and grad_output[0] is not None:
                g = to_host(grad_output[0])
                row = self._row(name)
                row.grad_mean, row.grad_std, row.grad_norm = float(g.mean()), float(g.std()), _norm(g)
        return record_gradient

    def step(self) -> None:
        """Close this training step (call after ``backward``): read the parameter gradients
        and add one row per layer to ``history``."""
        for name, module in self.layers.items():
            row = self._row(name)
            grads = [to_host(p.grad) for p in module.parameters() if p.grad is not None]
            if grads:
                row.weight_grad_norm = math.sqrt(sum(_norm(g) ** 2 for g in grads))
            self.history[name].append(row)
        self._current = {}
        self._steps += 1
        self.value = self.to_svg()

    def latest(self, metric: str) -> dict[str, float]:
        """``{layer: value}`` of one metric at the last step (e.g. ``"dead_fraction"``)."""
        if metric not in LayerStep.__dataclass_fields__ or metric == "step":
            raise ValueError(f"unknown metric {metric!r}; choose one of "
                             f"{[f for f in LayerStep.__dataclass_fields__ if f != 'step']}")
        return {name: getattr(rows[-1], metric) for name, rows in self.history.items() if rows}

    def remove(self) -> None:
        """Take every hook off the model."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def to_svg(self) -> str:
        body = []
        for k, (metric, (title, log)) in enumerate(METRICS.items()):
            x0, y0 = (k % 2) * PANEL_W + 50, (k // 2) * PANEL_H + 25
            curves = {name: ([r.step for r in rows], [getattr(r, metric) for r in rows])
                      for name, rows in self.history.items()}
            curves = {n: c for n, c in curves.items() if any(math.isfinite(v) for v in c[1])}
            xs = [s for c in curves.values() for s in c[0]] or [0, 1]
            ys = [v for c in curves.values() for v in c[1]] or [0, 1]
            panel = Panel.fit(x0, y0, PANEL_W - 70, PANEL_H - 60, xs, ys, ylog=log)
            body += panel.frame(title + (" (log)" if log else ""), xlabel="step")
            for i, name in enumerate(self.layers):
                if name in curves:
                    colour = PALETTE[i % len(PALETTE)]
                    body.append(panel.line(*curves[name], colour, label=f"layer {name}"))
        legend_y = 2 * PANEL_H + 5
        for i, name in enumerate(self.layers):
            colour = PALETTE[i % len(PALETTE)]
            x = 50 + (i % 6) * 95
            y = legend_y + (i // 6) * 16
            body.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{colour}"/>'
                        f'<text x="{x + 14}" y="{y + 9}" font-size="10">'
                        f'{escape(name)}: {type(self.layers[name]).__name__}</text>')
        height = legend_y + 16 * (math.ceil(len(self.layers) / 6)) + 5
        return document(2 * PANEL_W, height, body, kind="layer-stats")
