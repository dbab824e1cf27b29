"""EngineMap: the engine's replaceable parts, the learner's highlighted.

::

    EngineMap()            # from tg.exercises.progress(), read when drawn
    EngineMap().refresh()  # draw again after solving or plugging something

One box per engine part that a build exercise replaces, grouped by layer (autograd,
the operations' backwards, the optimizers, the cuda kernels, ...). A box is orange
while your function runs as that part (plugged now), green once every exercise that
builds it was solved in this session, grey while the engine's own code runs it. Under
the boxes, each chapter's exercises as small squares, solved ones green. Everything
comes from the exercise catalog, the latest verdicts and the plugged parts: nothing
is drawn by hand.
"""
from __future__ import annotations

import ipywidgets as widgets

from . import _svg
from ._display import StaticSVG

BOX_W, BOX_H, GAP = 150, 38, 8
PLUGGED, SOLVED, ENGINE = "#ffb347", "#9be39b", "#e6e6e6"
LAYER_TITLES = {"autograd": "autograd", "backward": "backward formulas", "optim": "optimizers",
                "cuda": "cuda kernels", "compile": "compiler passes", "jit": "compiler",
                "tune": "hyperparameter search", "distributed": "distributed"}


def _fitting_size(label: str, largest: float = 10.0) -> float:
    """A font size at which ``label`` fits in a box (a character is about 0.55 em wide)."""
    return round(min(largest, (BOX_W - 8) / (0.55 * max(len(label), 1))), 1)


def _layer(part: str) -> str:
    return part.replace(":", ".").split(".")[0]


def draw_engine_map(progress) -> str:
    """SVG of a :class:`teachgrad.exercises.catalog.Progress`."""
    from teachgrad.exercises import catalog

    body = [_svg.text(4, 14, f"{len(progress.solved())} of {len(progress.status)} exercises "
                             "solved in this session", 12, "start", "bold"),
            _svg.text(4, 30, "engine parts: orange = your code runs it now, green = you built "
                             "it, grey = the engine's own", 10, "start", fill="#555555")]
    layers: dict[str, list] = {}
    for part in progress.parts:
        layers.setdefault(_layer(part.name), []).append(part)
    y, width = 44, 470
    for layer, parts in layers.items():
        body.append(_svg.text(4, y + 8, LAYER_TITLES.get(layer, layer), 11, "start", "bold"))
        y += 18
        for k, part in enumerate(parts):
            x0 = 10 + k * (BOX_W + GAP)
            fill = PLUGGED if part.plugged else SOLVED if part.solved else ENGINE
            tip = (f"{part.name}: exercise {', '.join(part.exercises)}; "
                   + ("your function runs it now" if part.plugged else
                      "solved" if part.solved else "the engine's own code"))
            body.append(_svg.rect(x0, y, BOX_W, BOX_H, fill, "#888888", title=tip))
            body.append(_svg.text(x0 + BOX_W / 2, y + 13, part.name, _fitting_size(part.name)))
            body.append(_svg.text(x0 + BOX_W / 2, y + 28, "exercise " + ", ".join(part.exercises),
                                  9, fill="#555555"))
            width = max(width, x0 + BOX_W + 10)
        y += BOX_H + 12
    body.append(_svg.text(4, y + 8, "exercises by chapter", 11, "start", "bold"))
    y += 18
    chapters: dict[str, list] = {}
    for exercise in catalog():
        chapters.setdefault(exercise.chapter, []).append(exercise)
    for row, (chapter, exercises) in enumerate(chapters.items()):
        yy = y + row * 18
        body.append(_svg.text(30, yy + 7, chapter.lstrip("0"), 9, "end", fill="#555555"))
        for k, exercise in enumerate(exercises):
            state = progress.status[exercise.id]
            fill = SOLVED if state == "solved" else "#f4b6b6" if state in ("wrong", "error") \
                else "#ffffff"
            body.append(_svg.rect(36 + k * 16, yy, 14, 14, fill, "#999999",
                                  title=f"{exercise.id} ({exercise.kind}): {exercise.title}: {state}"))
    y += len(chapters) * 18 + 6
    return _svg.document(width, y, body, "engine-map")


class EngineMap(StaticSVG, widgets.VBox):
    """The picture of :func:`teachgrad.exercises.progress` (see the module docstring)."""

    def __init__(self) -> None:
        self.canvas = widgets.HTML()
        self.button = widgets.Button(description="refresh", icon="refresh")
        self.button.on_click(lambda _: self.refresh())
        super().__init__([self.button, self.canvas])
        self.refresh()

    def refresh(self) -> None:
        """Read the progress again and redraw."""
        from teachgrad.exercises import progress

        self.progress = progress()
        self.canvas.value = draw_engine_map(self.progress)

    def to_svg(self) -> str:
        return draw_engine_map(self.progress)
