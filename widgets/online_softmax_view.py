"""OnlineSoftmaxView: one query row of the tiled attention kernel, key tile by key tile.

::

    OnlineSoftmaxView(T=13, S=21, head_dim=4, block_q=4, block_k=4, causal=False, row=12)

The view launches teachgrad's tiled attention kernel in recording mode
(:func:`teachgrad.kernels.attention_record.record_online_softmax`): the thread that owns
the chosen query row writes its running state after every key tile. Step through the
tiles to see, for that row:

* **scores** -- one bar per key, grouped in the kernel's key tiles (tiles not reached yet
  are faded; ``×``: masked by causality; tiles the causal kernel skipped are marked);
  the dashed line is the running max ``m`` after this tile, the dotted one ``m`` before it;
* **weights** -- ``exp(score - m) / l`` for the keys seen so far (filled), against the
  exact softmax of the whole row (outlined). When a tile raises the max, the weights of
  the earlier keys shrink by the factor ``exp(m_old - m_new)``: the rescaling;
* a table of ``m``, ``l`` and the rescale factor after each tile, and the output row as
  it stood then against naive attention's.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import numpy as np

from . import _svg
from ._display import StaticSVG
from ._stepping import StepControls

BAR = 20
PLOT = 110


def _y(value: float, top: float, bottom: float, y0: float) -> float:
    """Where ``value`` sits on a panel spanning ``bottom``..``top`` drawn from ``y0`` down."""
    return y0 + PLOT * (top - value) / (top - bottom) if top > bottom else y0 + PLOT / 2


def _score_panel(record: Any, step: int, x0: float, y0: float) -> list[str]:
    finite = record.scores[np.isfinite(record.scores)]
    top, bottom = max(float(finite.max()), 0.0), min(float(finite.min()), 0.0)
    m_before, m, _, _ = record.state[step]
    body = [_svg.text(x0, y0 - 12, f"scores of query row {record.row} (scaled q·k)", 12,
                      "start", "bold")]
    zero = _y(0.0, top, bottom, y0)
    for tile in range(record.visited):
        keys = record.keys_of(tile)
        body.append(_svg.rect(x0 + keys.start * BAR, y0, len(keys) * BAR, PLOT,
                              _svg.category_colour(tile, 0.8), "#ffffff"))
        body.append(_svg.text(x0 + (keys.start + len(keys) / 2) * BAR, y0 + PLOT + 12,
                              f"tile {tile}", 9))
        for key in keys:
            body += _score_bar(record, key, tile <= step, x0, y0, zero, top, bottom)
    if record.visited < record.tiles:  # the causal kernel never loaded these keys
        start = record.keys_of(record.visited).start
        body.append(_svg.rect(x0 + start * BAR, y0, (record.S - start) * BAR, PLOT, _svg.IDLE,
                              "#ffffff", title="tiles right of the diagonal: skipped"))
        body.append(_svg.text(x0 + (start + record.S) / 2 * BAR, y0 + PLOT / 2,
                              f"tiles {record.visited}..{record.tiles - 1}: skipped (causal)", 10,
                              fill="#666666"))
    lines = [(m, "6,3", f"m = {m:.3g}")]
    if np.isfinite(m_before) and m_before != m:
        lines.append((m_before, "2,2", f"m before = {m_before:.3g}"))
    for value, dash, label in lines:
        y = _y(value, top, bottom, y0)
        body.append(f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x0 + record.S * BAR:.1f}" '
                    f'y2="{y:.1f}" stroke="{_svg.RED}" stroke-dasharray="{dash}"/>')
        body.append(_svg.text(x0 + record.S * BAR + 4, y + (10 if dash == "2,2" else 0), label,
                              10, "start", fill=_svg.RED))
    return body


def _score_bar(record: Any, key: int, seen: bool, x0: float, y0: float, zero: float,
               top: float, bottom: float) -> list[str]:
    score, x = record.scores[key], x0 + key * BAR
    if np.isneginf(score):  # masked: above the diagonal
        return [_svg.text(x + BAR / 2, zero - 6, "×", 11, fill="#999999")]
    y = _y(float(score), top, bottom, y0)
    colour = _svg.PALETTE[(key // record.block_k) % len(_svg.PALETTE)]
    fill = colour if seen else _svg.lighten(colour, 0.75)
    return [_svg.rect(x + 2, min(y, zero), BAR - 4, abs(zero - y), fill,
                      title=f"key {key}: score {score:.3f}")]


def _weight_panel(record: Any, step: int, x0: float, y0: float) -> list[str]:
    now, exact = record.weights_after(step), record.final_weights()
    body = [_svg.text(x0, y0 - 12, "weights exp(score − m) / l so far (filled) against the "
                      "final softmax (outlined)", 12, "start", "bold")]
    top = max(float(np.nanmax(exact)), float(np.nanmax(now)), 1e-12)
    for key in range(record.S):
        x = x0 + key * BAR
        h_exact = PLOT * exact[key] / top
        body.append(_svg.rect(x + 2, y0 + PLOT - h_exact, BAR - 4, h_exact, "none", "#555555",
                              title=f"key {key}: final weight {exact[key]:.3f}"))
        if now[key] > 0:
            h = PLOT * now[key] / top
            colour = _svg.PALETTE[(key // record.block_k) % len(_svg.PALETTE)]
            body.append(_svg.rect(x + 4, y0 + PLOT - h, BAR - 8, h, colour,
                                  title=f"key {key}: weight now {now[key]:.3f}"))
        body.append(_svg.text(x + BAR / 2, y0 + PLOT + 10, str(key), 8, fill="#666666"))
    return body


def draw_online_softmax(record: Any, step: int) -> str:
    """SVG of the row's state after visited tile ``step``."""
    x0 = 20
    body = _score_panel(record, step, x0, 30)
    body += _weight_panel(record, step, x0, 30 + PLOT + 60)
    width = x0 + record.S * BAR + 120
    return _svg.document(width, 2 * PLOT + 120, body, "online-softmax")


def state_table(record: Any, step: int) -> str:
    """The running state after each tile (HTML), the current tile in bold."""
    rows = []
    for t in range(record.visited):
        m_before, m, l, rescale = record.state[t]
        cells = (f"<td>{t}</td><td align='right'>{m:.4g}</td><td align='right'>{l:.4g}</td>"
                 f"<td align='right'>{rescale:.4g}</td>")
        style = " style='font-weight:bold; background:#fde3e3'" if t == step else ""
        rows.append(f"<tr{style}>{cells}</tr>")
    out = ", ".join(f"{v:.4f}" for v in record.partial_out[step])
    ref = ", ".join(f"{v:.4f}" for v in record.reference)
    return (f"<table><tr><th>tile</th><th>m</th><th>l</th><th>rescale exp(m_old − m)</th></tr>"
            f"{''.join(rows)}</table><small>Output row acc / l after tile {step}: [{out}]; "
            f"naive attention: [{ref}]. Recorded by the kernel on: {record.device}.</small>")


class OnlineSoftmaxView(StepControls, StaticSVG, widgets.VBox):
    """Step through the key tiles of one query row of the tiled attention kernel.

    Args:
        T, S: query and key lengths; head_dim: features per head.
        block_q, block_k: the kernel's query tile (threads per block) and key tile.
        causal: mask keys after the query (and skip tiles wholly right of the diagonal).
        row: the query row to follow (default: the last).
        seed: the random q, k, v.

    Attributes:
        record: the :class:`~teachgrad.kernels.attention_record.OnlineSoftmaxRecord`.
    """

    def __init__(self, T: int = 13, S: int = 21, head_dim: int = 4, block_q: int = 4,
                 block_k: int = 4, causal: bool = False, row: int | None = None,
                 seed: int = 0) -> None:
        from teachgrad.kernels.attention_record import record_online_softmax

        self.record = record_online_softmax(T, S, head_dim, block_q, block_k, causal, row, seed)
        controls = self._step_controls(self.record.visited - 1, "tile")
        self.caption = widgets.HTML()
        self.canvas = widgets.HTML()
        self.table = widgets.HTML()
        super().__init__([widgets.HBox(controls), self.caption, self.canvas, self.table])
        self._draw()

    def _draw(self) -> None:
        self._disable_ends()
        self.caption.value = (f'<div class="teachgrad-online-softmax-step" data-step="{self.step}">'
                              f"<b>tile {self.step + 1} of {self.record.visited}</b>: "
                              f"{self.record.steps[self.step]}</div>")
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'
        self.table.value = state_table(self.record, self.step)

    def to_svg(self) -> str:
        return draw_online_softmax(self.record, self.step)
