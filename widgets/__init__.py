"""teachgrad.widgets: pictures of what the engine really does, live in Jupyter.

* :class:`GraphView` — the autograd graph behind a tensor;
* :class:`BackpropStepper` — the backward engine, one node at a time;
* :class:`SpeedChart` — measured time against size: numpy, numba CPU, GPU kernels;
* :class:`ThreadMap` — which GPU thread handled which element (grid-stride loop);
* :class:`TileView` — the phases of the shared-memory tiled matmul;
* :class:`RaceView` — shared-memory races found by running a kernel with a log.

Every widget draws data the engine recorded (a graph snapshot, the steps of
the real backward generator, timings from ``teachgrad.bench``, logs of real
kernel launches); none re-enacts the engine. Each also renders as a static
picture (SVG or PNG, ``.to_svg()``), which is what the book shows without a kernel.
"""
from .graph_view import GraphView
from .race_view import RaceView
from .render import GraphvizUnavailable, render_svg
from .speed_chart import SpeedChart
from .stepper import BackpropStepper
from .thread_map import ThreadMap
from .tile_view import TileView
from .timeline import Timeline

__all__ = ["BackpropStepper", "GraphView", "GraphvizUnavailable", "RaceView", "SpeedChart",
           "ThreadMap", "TileView", "render_svg"]
