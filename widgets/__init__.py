"""teachgrad.widgets: pictures of what the engine really does, live in Jupyter.

* :class:`GraphView` — the autograd graph behind a tensor;
* :class:`BackpropStepper` — the backward engine, one node at a time;
* :class:`SpeedChart` — measured time against size: numpy, numba CPU, GPU kernels;
* :class:`ThreadMap` — which GPU thread handled which element (grid-stride loop);
* :class:`TileView` — the phases of the shared-memory tiled matmul;
* :class:`OnlineSoftmaxView` — one row of the tiled attention kernel's online softmax, tile by tile;
* :class:`RaceView` — shared-memory races found by running a kernel with a log;
* :class:`AccessMap` — who read and wrote each element of any kernel's arrays;
* :class:`EngineMap` — the engine's replaceable parts, the ones running your code highlighted;
* :class:`LiveCurves`, :class:`LayerStats` — training curves and per-layer statistics,
  fed by ``SummaryWriter`` calls and module hooks;
* :class:`Timeline` — the host and stream lanes of asynchronous ``cuda`` work;
* :class:`ProfileView` — a profile's busiest ops and its trace in speedscope (vendored);
* :class:`MemoryTimelineView` — live device bytes over a step, by what they are;
* :class:`TuneView` — the brackets and rungs of a ``teachgrad.tune`` search;
* :class:`RankTimeline`, :class:`RingView` — a distributed job's ranks over time; the ring
  all-reduce step by step.

Every widget draws data the engine recorded (a graph snapshot, the steps of
the real backward generator, timings from ``teachgrad.bench``, logs of real
kernel launches); none re-enacts the engine. Each also renders as a static
picture (SVG or PNG, ``.to_svg()``), which is what the book shows without a kernel.
"""
from .access_map import AccessMap
from .engine_map import EngineMap
from .graph_view import GraphView
from .layer_stats import LayerStats
from .live_curves import LiveCurves
from .memory_timeline import MemoryTimelineView
from .online_softmax_view import OnlineSoftmaxView
from .profile_view import ProfileView
from .race_view import RaceView
from .rank_timeline import RankTimeline
from .ring_view import RingView
from .render import GraphvizUnavailable, render_svg
from .speed_chart import SpeedChart
from .stepper import BackpropStepper
from .thread_map import ThreadMap
from .tile_view import TileView
from .timeline import Timeline
from .tune_view import TuneView

__all__ = ["AccessMap", "BackpropStepper", "EngineMap", "GraphView", "GraphvizUnavailable", "LayerStats",
           "LiveCurves", "MemoryTimelineView", "OnlineSoftmaxView", "ProfileView", "RaceView", "RankTimeline", "RingView", "SpeedChart", "ThreadMap",
           "TileView", "Timeline", "TuneView", "render_svg"]
