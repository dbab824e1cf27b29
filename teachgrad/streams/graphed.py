"""``tg.cuda.make_graphed_callables``: a module's forward and backward as two CUDA graphs.

After PyTorch's function of the same name: each callable (a Module or a function of
tensors) is warmed up on a side stream, then its forward is captured in one graph and
its backward (the gradients of its outputs with respect to its inputs and parameters)
in a second. What comes back is called like the original, inside any training loop,
and autograd still works through it: the forward copies the arguments into the static
inputs and replays the first graph; the backward copies the incoming gradients into the
static gradient buffers and replays the second, and the parameters' ``.grad`` fill up as
usual. The arguments must keep the sample's shapes, dtypes and ``requires_grad``.
"""
from __future__ import annotations

from typing import Any, Callable

from .graphs import CUDAGraph, MemPool, graph
from .stream import Stream, current_stream, stream as use_stream


def make_graphed_callables(callables: Any, sample_args: tuple, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: MemPool | None = None) -> Any:
    """Graphed versions of ``callables`` (one, or a tuple); ``sample_args`` their arguments."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    _check_arguments(callables, sample_args, num_warmup_iters, allow_unused_input, pool)
    graphed = tuple(_graphed(fn, tuple(args), num_warmup_iters, allow_unused_input, pool)
                    for fn, args in zip(callables, sample_args))
    return graphed[0] if single else graphed


def _check_arguments(callables: tuple, sample_args: Any, warmups: Any, allow_unused: Any,
                     pool: Any) -> None:
    from ..tensor import Tensor

    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise TypeError("sample_args must be a tuple of argument tuples, one per callable "
                        f"({len(callables)}), e.g. make_graphed_callables(model, (x,))")
    for fn, args in zip(callables, sample_args):
        if not callable(fn):
            raise TypeError(f"make_graphed_callables takes callables (Modules or functions), "
                            f"got {type(fn).__name__}")
        if not isinstance(args, tuple) or not all(isinstance(a, Tensor) for a in args):
            raise TypeError("each callable's sample arguments must be a tuple of tensors, e.g. (x,)")
        if any(a.device.type != "cuda" for a in args):
            raise ValueError("the sample arguments must be cuda tensors: a graph holds device work")
    if isinstance(warmups, bool) or not isinstance(warmups, int) or warmups < 0:
        raise ValueError(f"num_warmup_iters must be an int >= 0, got {warmups!r}")
    if not isinstance(allow_unused, bool):
        raise TypeError(f"allow_unused_input must be True or False, got {allow_unused!r}")
    if pool is not None and not isinstance(pool, MemPool):
        raise TypeError("pool must be a handle from tg.cuda.graph_pool_handle() or None")


def _as_tuple(outputs: Any) -> tuple:
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _graphed(fn: Callable, args: tuple, warmups: int, allow_unused: bool,
             pool: MemPool | None) -> Callable:
    """Warm ``fn`` up, capture its forward and backward, return the graphed callable."""
    from .. import autograd, nn
    from ..creation import zeros_like

    params = tuple(fn.parameters()) if isinstance(fn, nn.Module) else ()
    inputs = args + params
    wanted = tuple(t for t in inputs if t.requires_grad)

    def run_backward(outputs: tuple, grads: tuple) -> tuple:
        differentiable = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
        return autograd.grad([o for o, _ in differentiable], wanted,
                             grad_outputs=[g for _, g in differentiable], allow_unused=allow_unused)

    side = Stream()
    side.wait_stream(current_stream())
    with use_stream(side):
        for _ in range(warmups):
            outputs = _as_tuple(fn(*args))
            if wanted:
                run_backward(outputs, tuple(zeros_like(o) for o in outputs))
    current_stream().wait_stream(side)

    forward_graph, backward_graph = CUDAGraph(), CUDAGraph()
    with graph(forward_graph, pool=pool):
        static_outputs = _as_tuple(fn(*args))
    static_grads = tuple(zeros_like(o) for o in static_outputs)
    static_grad_inputs: tuple = ()
    if wanted:
        with graph(backward_graph, pool=forward_graph.pool()):
            static_grad_inputs = run_backward(static_outputs, static_grads)
    graphed_function = _graphed_function(args, inputs, wanted, static_outputs, static_grads,
                                         static_grad_inputs, forward_graph, backward_graph)

    def graphed_call(*new_args: Any) -> Any:
        outputs = graphed_function.apply(*new_args, *params)
        return outputs if len(static_outputs) > 1 else outputs[0]

    graphed_call.forward_graph, graphed_call.backward_graph = forward_graph, backward_graph
    if isinstance(fn, nn.Module):
        return _graphed_module(fn, graphed_call)
    return graphed_call


def _graphed_function(args, inputs, wanted, static_outputs, static_grads, static_grad_inputs,
                      forward_graph, backward_graph):
    """The autograd Function whose forward and backward are the two replays."""
    from ..autograd import Function

    grad_of = {id(t): g for t, g in zip(wanted, static_grad_inputs)}
    positions = [grad_of.get(id(t)) if t.requires_grad else None for t in inputs]
    shapes = [(tuple(a.shape), a.dtype, a.requires_grad) for a in args]

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *given):
            for new, (shape, dtype, needs) in zip(given, shapes):  # all checked, then copied
                if (tuple(new.shape), new.dtype, new.requires_grad) != (shape, dtype, needs):
                    raise ValueError(
                        f"a graphed callable was captured for arguments of shape {list(shape)} "
                        f"({dtype}, requires_grad={needs}), got {list(new.shape)} ({new.dtype}, "
                        f"requires_grad={new.requires_grad}). Fix: graph it again for these")
            for static, new in zip(args, given):
                if new is not static:
                    static.copy_(new)
            forward_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            for static, g in zip(static_grads, grads):
                if g is None:
                    static.zero_()
                else:
                    static.copy_(g)
            backward_graph.replay()
            return tuple(None if g is None else g.detach() for g in positions)

    return Graphed


def _graphed_module(module: Any, graphed_call: Callable) -> Any:
    """``module`` with its forward replaced: the graphs run in the training mode they were
    captured in, the original forward in the other one (as PyTorch does)."""
    original, captured_training = module.forward, module.training

    def forward(*new_args: Any) -> Any:
        if module.training == captured_training:
            return graphed_call(*new_args)
        return original(*new_args)

    module.forward = forward
    module.forward_graph, module.backward_graph = graphed_call.forward_graph, graphed_call.backward_graph
    return module
