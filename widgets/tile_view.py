"""TileView: the phases of one output tile of the shared-memory tiled matmul.

::

    TileView(M=6, K=10, N=7, tile=4, out_tile=(1, 1))

The view launches teachgrad's tiled matmul kernel in recording mode
(:func:`teachgrad.kernels.record.record_tiled_matmul`) and steps through what
the block computing one output tile of ``C = A @ B`` did, phase by phase:

1. **load**: each thread copies one element of A and one of B into the shared
   tiles (the colours say which thread copied which element; grey "0" cells lie
   past the edge of A or B and were filled with zeros);
2. **barrier**: ``syncthreads()`` — nobody reads the tiles until all are loaded;
3. **multiply**: each thread multiplies a row of the A tile by a column of the
   B tile, from fast shared memory (the chosen thread's row and column are outlined);
4. **barrier**: nobody overwrites the tiles until everyone has read them.

Below, the memory traffic the kernels counted themselves: global reads of the
tiled kernel against the naive one (one thread per output, no sharing).
"""
from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from . import _svg
from ._display import StaticSVG
from ._stepping import StepControls

CELL = 22


def _thread_colour(record: Any, ty: int, tx: int) -> str:
    return _svg.ramp_colour(ty * record.tile + tx, record.tile * record.tile)


def _matrix(x: float, y: float, rows: int, cols: int, name: str, fills: dict, outline: list,
            labels: dict | None = None) -> list[str]:
    """A ``rows x cols`` grid at (x, y); ``fills`` maps (r, c) to a colour."""
    body = [_svg.text(x + cols * CELL / 2, y - 10, name, 12, weight="bold")]
    for r in range(rows):
        for c in range(cols):
            fill = fills.get((r, c), "#ffffff")
            body.append(_svg.rect(x + c * CELL, y + r * CELL, CELL, CELL, fill, "#cccccc",
                                  title=f"{name}[{r}, {c}]"))
            if labels and (r, c) in labels:
                body.append(_svg.text(x + c * CELL + CELL / 2, y + r * CELL + CELL / 2,
                                      labels[(r, c)], 7))
    for (r0, c0, r1, c1, colour) in outline:  # rectangles around cell ranges [r0, r1) x [c0, c1)
        body.append(_svg.rect(x + c0 * CELL, y + r0 * CELL, (c1 - c0) * CELL, (r1 - r0) * CELL,
                              "none", colour, width=2.5))
    return body


def draw_tile_step(record: Any, step: int, thread: tuple[int, int] = (0, 0)) -> str:
    """SVG of ``record.steps[step]``; a multiply step follows ``thread`` = (ty, tx)."""
    phase, kind, _ = record.steps[step]
    T, (ty, tx) = record.tile, thread
    k0, k1 = phase * T, min((phase + 1) * T, record.K)
    rows, cols = record.out_rows, record.out_cols
    # which thread loaded which element in this phase, straight from the recording
    a_fill, b_fill, a_shared, b_shared, a_text, b_text = {}, {}, {}, {}, {}, {}
    for sy in range(T):
        for sx in range(T):
            colour = _thread_colour(record, sy, sx)
            for loads, fill, shared, label, name in (
                    (record.a_loads, a_fill, a_shared, a_text, "A"),
                    (record.b_loads, b_fill, b_shared, b_text, "B")):
                r, c = (int(v) for v in loads[phase, sy, sx])
                if r >= 0:
                    fill[(r, c)] = colour
                    shared[(sy, sx)] = colour
                    label[(sy, sx)] = f"{name}{r},{c}"
                else:
                    shared[(sy, sx)] = _svg.IDLE
                    label[(sy, sx)] = "0"
    left, top = 30 + record.K * CELL + 30, 40 + record.K * CELL + 30  # where C starts
    tile_box = (rows.start, cols.start, rows.stop, cols.stop, _svg.RED)
    body = []
    body += _matrix(left, 40, record.K, record.N, "B", b_fill,
                    [(k0, cols.start, k1, cols.stop, "#333333")])
    body += _matrix(30, top, record.M, record.K, "A", a_fill,
                    [(rows.start, k0, rows.stop, k1, "#333333")])
    c_fill = {(r, c): "#fde3e3" for r in rows for c in cols}
    c_outline = [tile_box]
    if kind == "multiply":  # the output the followed thread accumulates
        c_outline.append((rows.start + ty, cols.start + tx, rows.start + ty + 1,
                          cols.start + tx + 1, "#000000"))
    body += _matrix(left, top, record.M, record.N, "C", c_fill, c_outline)
    # the two shared-memory tiles
    sx0 = left + record.N * CELL + 50
    outline_a, outline_b = [], []
    if kind == "multiply":
        outline_a = [(ty, 0, ty + 1, T, "#000000")]
        outline_b = [(0, tx, T, tx + 1, "#000000")]
    body += _matrix(sx0, 40, T, T, "b_tile (shared)", b_shared, outline_b, b_text)
    body += _matrix(sx0, top, T, T, "a_tile (shared)", a_shared, outline_a, a_text)
    if kind == "barrier":
        y = top - 24
        body.append(_svg.rect(sx0 - 8, y, T * CELL + 16, 16, _svg.RED))
        body.append(_svg.text(sx0 + T * CELL / 2, y + 8, "syncthreads(): all wait", 10,
                              weight="bold", fill="#ffffff"))
    if kind == "multiply":
        r, c = rows.start + ty, cols.start + tx
        note = (f"thread ({ty}, {tx}): C[{r}, {c}] += a_tile row {ty} · b_tile column {tx}"
                if r < record.M and c < record.N else
                f"thread ({ty}, {tx}) lies past the edge of C: it helps load, writes nothing")
        body.append(_svg.text(30, top + record.M * CELL + 24, note, 11, "start"))
    width = sx0 + T * CELL + 20
    height = top + max(record.M, T) * CELL + 40
    return _svg.document(width, height, body, "tile-view")


def traffic_table(record: Any) -> str:
    """Counts measured by the kernels, beside the closed-form global reads (HTML)."""
    tiled, naive = record.counts, record.naive_counts
    ratio = naive["global_reads"] / max(tiled["global_reads"], 1)
    rows = [("global reads (slow)", tiled["global_reads"], naive["global_reads"]),
            ("shared reads (fast)", tiled["shared_reads"], naive["shared_reads"]),
            ("shared writes", tiled["shared_writes"], naive["shared_writes"]),
            ("barriers passed", tiled["barriers"], naive["barriers"])]
    cells = "".join(f"<tr><td>{name}</td><td align='right'>{t}</td><td align='right'>{n}</td></tr>"
                    for name, t, n in rows)
    formula = record.formulas
    return (f"<table><tr><th></th><th>tiled (tile {record.tile})</th><th>naive</th></tr>{cells}"
            f"</table><small>Summed over all threads of the whole {record.M}×{record.K} @ "
            f"{record.K}×{record.N} product, as counted by the kernels. The tiled kernel reads "
            f"global memory {ratio:.1f}× less (formulas: naive 2·M·N·K = "
            f"{formula['naive']['global_reads']}, tiled ⌈N/T⌉·M·K + ⌈M/T⌉·K·N = "
            f"{formula['tiled']['global_reads']}). Recorded on: {record.device}.</small>")


class TileView(StepControls, StaticSVG, widgets.VBox):
    """Step through the phases of one output tile of the tiled matmul.

    Args:
        M, K, N: ``A`` is ``M x K``, ``B`` is ``K x N``.
        tile: tile size (threads per block: ``tile * tile``).
        out_tile: which output tile (block row, block column) to follow.
        make_matmul: a tiled kernel factory of yours (``make_matmul(tile) -> kernel(A, B, C)``)
            to launch instead of teachgrad's; its record is read from the simulator's log.

    Attributes:
        record: the :class:`~teachgrad.kernels.record.TileRecord` of the launch.
    """

    def __init__(self, M: int = 6, K: int = 10, N: int = 7, tile: int = 4,
                 out_tile: tuple[int, int] = (0, 0), make_matmul: Any = None) -> None:
        from teachgrad.kernels.record import record_tiled_matmul
        from teachgrad.kernels.record_yours import tiled_launch_record

        self.record = (record_tiled_matmul(M, K, N, tile=tile, out_tile=out_tile)
                       if make_matmul is None else
                       tiled_launch_record(make_matmul, M, K, N, tile=tile, out_tile=out_tile))
        controls = self._step_controls(len(self.record.steps) - 1)
        threads = [(f"({ty}, {tx})", (ty, tx)) for ty in range(tile) for tx in range(tile)]
        self.thread_picker = widgets.Dropdown(options=threads, value=(0, 0), description="thread")
        self.caption = widgets.HTML()
        self.canvas = widgets.HTML()
        self.traffic = widgets.HTML(traffic_table(self.record))
        super().__init__([widgets.HBox(controls + [self.thread_picker]),
                          self.caption, self.canvas, self.traffic])
        self.thread_picker.observe(lambda change: self._draw(), names="value")
        self._draw()

    def _draw(self) -> None:
        phase, kind, words = self.record.steps[self.step]
        self._disable_ends()
        self.caption.value = (f'<div class="teachgrad-tile-step" data-kind="{kind}">'
                              f"<b>step {self.step + 1} of {len(self.record.steps)}</b> "
                              f"(output tile {self.record.out_tile}): {words}</div>")
        self.canvas.value = f'<div style="overflow:auto">{self.to_svg()}</div>'

    def to_svg(self) -> str:
        return draw_tile_step(self.record, self.step, self.thread_picker.value)
