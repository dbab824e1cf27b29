"""Static graphs: trace a function into a graph, run, save, load and compile it.

::

    traced = tg.jit.trace(model, (x,))      # run once, record every operation
    traced.graph.print_tabular()            # the graph as a table
    tg.jit.save(traced, "model.tgjit")      # JSON + npz: no Python code inside
    again = tg.jit.load("model.tgjit")      # runs without the model's class
    fast = tg.compile(model)                # passes + fused numba kernels

Modules: :mod:`.ir` (the graph), :mod:`.tracer` (recording), :mod:`.interpreter`
(running), :mod:`.writes` (recording in-place writes), :mod:`.serialize` (save/load;
:mod:`.graph_check` checks a file whole, :mod:`.registry` holds the Functions a file may
name), :mod:`.passes` (the optimisations), :mod:`.codegen` (fused kernels), :mod:`.guards`
(what a compiled graph assumed), :mod:`.compiler` (``tg.compile``).
"""
from __future__ import annotations

from .ir import Graph, Node, Ref, TensorMeta
from .traced import TracedFunction, trace
from .tracer import TracerWarning, TracingError

__all__ = ["Graph", "Node", "Ref", "TensorMeta", "TracedFunction", "trace", "TracerWarning",
           "TracingError"]
from .registry import register_function, registered_functions, unregister_function  # noqa: E402
from .serialize import GraphFormatError, load, save  # noqa: E402

__all__ += ["GraphFormatError", "load", "save", "register_function", "registered_functions",
            "unregister_function"]
from . import passes  # noqa: E402
from .codegen import cache_info, clear_cache  # noqa: E402
from .compiler import CompiledFunction, compile  # noqa: E402

__all__ += ["passes", "cache_info", "clear_cache", "CompiledFunction", "compile"]
