"""The backward engine: run to the end or one step at a time.

:func:`backward_steps` is a generator. Each ``next()`` runs the backward of one
node and yields a :class:`BackwardStep` describing it: which node ran, the
gradient that arrived at it, and the gradients it sent to each of its inputs.
``tensor.backward()`` runs the same steps, in the same order, in a loop of its own
(:func:`_run_to_end`, which needs no step records), so a step-by-step viewer sees
exactly what ``backward()`` does; the tests hold the two to the same gradients, bit
for bit, and the same order.

Order: a node runs once every node that sends it a gradient has run (its
dependency count drops to zero). Among ready nodes the most recently created
runs first, and a leaf's ``AccumulateGrad`` runs as soon as it is ready — the
same rule PyTorch's engine follows.
"""
from __future__ import annotations

import heapq
import itertools
from collections import deque
from heapq import heappop, heappush
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from numpy import asarray, ndarray

from .. import dtypes
from ..backends import get_backend
from ..cuda_devices import current_index, on_tensors_device, using
from . import function, grad_mode, parts
from .function import FREED_GRAPH_MESSAGE, AccumulateGrad, Node
from .pieces import SENT_ALREADY, Pieces, add_piece, disown, merged, own_new

if TYPE_CHECKING:  # pragma: no cover
    # the class tensor.py hands to autograd.function (tensor.py is built on this module)
    from .function import Tensor


@dataclass(slots=True)
class BackwardStep:
    """What one step of backprop did (plain data for viewers and tests).

    Attributes:
        index: 0 for the first node run, then 1, 2, ...
        node: the graph node that ran (a ``Node`` or an ``AccumulateGrad``).
        grad_outputs: the gradient(s) that arrived at the node, one per output.
        grad_inputs: what the node sent along each edge of ``node.next_functions``
            (``None`` where an input needs no gradient).
        accumulated: per edge, True when the receiver already held a gradient
            from another edge, so this one was added to it (``x * x``, or a
            tensor used by two operations).
        leaf: for an ``AccumulateGrad`` step, the leaf tensor whose ``.grad`` was
            updated (its new value is ``leaf.grad``).
        pending: how many nodes are ready to run after this one; 0 means this
            was the last step (a viewer can tell backprop is finished).
    """

    index: int
    node: Any
    grad_outputs: tuple
    grad_inputs: tuple = ()
    accumulated: tuple = ()
    leaf: Any = None
    rule: str = field(default="")
    pending: int = 0


def _sum_to_shape(grad: "Tensor", shape: tuple[int, ...], node: Any, i: int) -> "Tensor":
    """Undo broadcasting: sum ``grad`` down to ``shape`` (what PyTorch's engine does too),
    after checking ``shape`` broadcasts to ``grad``'s shape (else the backward is wrong)."""
    lead = grad.ndim - len(shape)
    ok = lead >= 0 and all(n == 1 or n == grad.shape[lead + k] for k, n in enumerate(shape))
    if not ok:
        raise RuntimeError(
            f"{_who(node)} returned a gradient of shape {list(grad.shape)} for input {i}, "
            f"which has shape {list(shape)}: a backward must return one gradient per input, "
            "shaped like that input (or broadcastable to it)"
        )
    if SUM_TO_SHAPE.fn is None:
        return sum_to_shape(grad, shape)
    return _learners_sum_to_shape(grad, shape)


def sum_to_shape(grad: "Tensor", shape: tuple[int, ...]) -> "Tensor":
    """``grad`` summed over the dimensions broadcasting added or stretched, so that it
    has ``shape`` (which broadcasts to ``grad.shape``): the leading extra dimensions,
    and every dimension where ``shape`` has 1 and ``grad`` more."""
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, n in enumerate(shape) if n == 1 and grad.shape[lead + k] != 1
    )
    if axes:
        grad = grad.sum(dim=axes, keepdim=True)
    return grad.reshape(shape) if lead else grad


SUM_TO_SHAPE = parts.declare(
    "autograd.sum_to_shape",
    receives="(grad, shape): a gradient tensor, and the shape of the input it belongs to "
             "(a tuple that broadcasts to grad.shape)",
    returns="a tensor of exactly that shape, grad's dtype and device: grad summed over the "
            "dimensions broadcasting added or stretched",
    engine=sum_to_shape)


def _learners_sum_to_shape(grad: "Tensor", shape: tuple[int, ...]) -> "Tensor":
    out = SUM_TO_SHAPE.call(grad, tuple(shape))
    if not isinstance(out, function.Tensor):
        raise SUM_TO_SHAPE.reject(f"a {type(out).__name__} for a gradient of shape "
                                  f"{list(grad.shape)}", f"a tensor of shape {list(shape)}")
    if tuple(out.shape) != tuple(shape):
        raise SUM_TO_SHAPE.reject(f"shape {list(out.shape)} for a gradient of shape "
                                  f"{list(grad.shape)}", f"shape {list(shape)}")
    if out.dtype is not grad.dtype or out.device != grad.device:
        raise SUM_TO_SHAPE.reject(f"a {out.dtype} tensor on {out.device}",
                                  f"{grad.dtype} on {grad.device}, as the gradient it got")
    return out


def _who(node: Any) -> str:
    """How messages name a node's backward: the learner's when one is plugged into it."""
    part = parts._PARTS.get("backward:" + node.function.__name__)
    if part is not None and part.fn is not None:
        return f"your {part.name} ({parts.PLUGGED_WITH})"
    return f"function {node.name()}"


def _filled(shape: tuple, value: float, dtype: Any, device: Any) -> "Tensor":
    """A new tensor of ``shape`` holding ``value`` everywhere (outside any graph)."""
    backend = get_backend(device.type)
    if device.index is not None and device.index != current_index():
        with using(device.index):  # (filled on its own device)
            return _filled(shape, value, dtype, device)
    return function.Tensor._make(backend.full(tuple(shape), value, dtype.numpy), backend, device)


def _check_roots(tensors: Sequence["Tensor"], grads: Sequence[Any]) -> list:
    """Each root with the gradient backprop starts from (ones for a scalar loss)."""
    checked = []
    for t, g in zip(tensors, grads):
        if not t.requires_grad:
            raise RuntimeError(
                "element 0 of tensors does not require grad and does not have a grad_fn: "
                "nothing to differentiate. Fix: create the inputs with requires_grad=True "
                "(or call .requires_grad_()), and don't compute the loss under no_grad()."
            )
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs, but this tensor "
                    f"has shape {list(t.shape)}. Fix: reduce it first (loss.sum() or "
                    "loss.mean()), or pass gradient= with a tensor of the same shape."
                )
            g = _filled(t._array.shape, 1, t.dtype, t.device)  # d(loss)/d(loss) = 1
        elif not isinstance(g, function.Tensor):
            raise TypeError(f"gradient must be a tensor, not {type(g).__name__}")
        elif g.shape != t.shape:
            raise RuntimeError(
                f"gradient has shape {list(g.shape)} but the tensor has shape {list(t.shape)}: "
                "they must match"
            )
        elif g.device != t.device:
            raise RuntimeError(f"invalid gradient: expected device {t.device} but got {g.device}. "
                               f"Fix: gradient.to('{t.device}')")
        else:
            g = g.detach()  # the caller's tensor, used outside any graph
            if g.dtype is not t.dtype:
                g = g.to(t.dtype)  # PyTorch converts a root gradient to the root's dtype
        checked.append((t, g))
    return checked


def _dependencies(roots: list) -> dict[Any, int]:
    """How many edges lead into each node reachable from the roots.

    Also refuses a graph that an earlier backward already freed, before any
    gradient is computed (PyTorch notices only when a freed saved tensor is read).
    """
    deps: dict[Any, int] = {}
    # each node once, also when several roots are outputs of one node (their edges
    # would otherwise be counted once per root, and backward would wait forever)
    stack = list(dict.fromkeys(node for node, _, _ in roots))
    starts = set(stack)
    while stack:
        node = stack.pop()
        if type(node) is Node and node.ctx._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            count = deps.get(nxt)
            if count is None:  # reached for the first time: walk on from it
                deps[nxt] = 1
                if nxt not in starts:
                    stack.append(nxt)
            else:
                deps[nxt] = count + 1
    return deps


def backward_steps(
    tensors: "Tensor | Sequence[Tensor]",
    grad_tensors: Any = None,
    retain_graph: bool = False,
    *,
    records: bool = True,
) -> Iterator[BackwardStep]:
    """Backpropagate from ``tensors``, yielding one :class:`BackwardStep` per node.

    Everything is checked before the first step runs, so a mistake leaves no
    gradient half-written. With ``records=False`` the generator runs the very
    same steps but yields ``None`` for each instead of a record (what
    ``backward()`` uses: nobody reads the records, so it does not build them).
    """
    roots = _roots(tensors, grad_tensors)
    deps = _dependencies(roots)
    rank = None if ORDER.fn is None else _learners_order(roots, deps)
    return _run(roots, deps, rank, retain_graph, records)


def _roots(tensors: Any, grad_tensors: Any) -> list:
    """Where a backward pass starts, checked: (node, output index, gradient) per root."""
    if isinstance(tensors, function.Tensor):
        tensors = [tensors]
        grad_tensors = [grad_tensors]
    elif grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, function.Tensor):  # one gradient for a list of one root
        grad_tensors = [grad_tensors]
    roots = []
    for t, g in _check_roots(tensors, grad_tensors):
        node = t.grad_fn if t.grad_fn is not None else t._accumulator()
        roots.append((node, t._output_nr, g))
    return roots


def visiting_order(root: Any) -> list:
    """The order the engine visits the graph below ``root`` (a node) in, as a list:
    every node after all the nodes that send it a gradient and, among those ready, the
    most recently created first (the ``autograd.order`` part's own implementation).

    (Backward skips a node that receives no gradient at all; this order lists it.)
    """
    deps = _dependencies([(root, 0, None)])
    ready = _ReadyQueue()
    ready.push(root)
    order = []
    while ready.heap:
        node = heappop(ready.heap)[2]
        order.append(node)
        for nxt, _ in node.next_functions:
            if nxt is not None:
                deps[nxt] -= 1
                if deps[nxt] == 0:
                    ready.push(nxt)
    return order


ORDER = parts.declare(
    "autograd.order",
    receives="root: the graph node backward starts from (loss.grad_fn); each node lists "
             "the nodes it sends gradients to in node.next_functions, as (node, index) "
             "pairs, with None for an input that needs no gradient",
    returns="a list of every node reachable from root, root first, each one after every "
            "node that sends it a gradient (a topological order)",
    engine=visiting_order)


def _learners_order(roots: list, deps: dict[Any, int]) -> dict[Any, int]:
    """Each node's position in the learner's order, after checking it is one backward
    can run: every reachable node once, each after all the nodes that feed it."""
    if len({id(node) for node, _, _ in roots}) > 1:
        raise parts.PartError(ORDER.name, (
            f"your {ORDER.name} ({parts.PLUGGED_WITH}) orders a graph from one root, but "
            f"backward started from {len(roots)} tensors at once. Fix: backpropagate from "
            "one loss (add the losses up first), or unplug autograd.order."))
    root = roots[0][0]
    order = ORDER.call(root)
    if isinstance(order, (str, bytes)) or not hasattr(order, "__iter__"):
        raise ORDER.reject(f"a {type(order).__name__}", "a list of graph nodes")
    order = list(order)
    rank: dict[Any, int] = {}
    for i, node in enumerate(order):
        if type(node) is not Node and type(node) is not AccumulateGrad:
            hint = " (a tensor: its node is tensor.grad_fn)" if isinstance(
                node, function.Tensor) else ""
            raise ORDER.reject(f"a {type(node).__name__} at position {i}{hint}",
                               "graph nodes only, as found in node.next_functions")
        if node in rank:
            raise ORDER.reject(f"{node.name()} twice (positions {rank[node]} and {i})",
                               "every node exactly once")
        rank[node] = i
    if not order or order[0] is not root:
        first = order[0].name() if order else "an empty list"
        raise ORDER.reject(f"an order starting with {first}",
                           f"the root ({root.name()}) first: backward starts there")
    missing = [n for n in deps if n not in rank]
    if missing:
        raise ORDER.reject(f"an order without {missing[0].name()}, which the root reaches "
                           f"({len(missing)} node(s) left out)", "every reachable node")
    if len(rank) != len(deps) + (root not in deps):
        stray = next(n for n in order if n is not root and n not in deps)
        raise ORDER.reject(f"{stray.name()}, which the root does not reach",
                           "only the nodes reachable from the root")
    for node in order:
        for nxt, _ in node.next_functions:
            if nxt is not None and rank[nxt] < rank[node]:
                raise ORDER.reject(
                    f"an order that visits {nxt.name()} (position {rank[nxt]}) before "
                    f"{node.name()} (position {rank[node]}), which sends it a gradient",
                    "each node after every node that feeds it: a node can run only once "
                    "all its incoming gradients have arrived")
    return rank


class _ReadyQueue:
    """Nodes whose incoming gradients are complete, in the order they will run.

    The most recently created node first (leaves, whose sequence is infinite,
    before everything); nodes that tie run in the order they became ready, so
    the same graph always steps in the same order. (A heap of
    ``(-sequence, arrival, node)``; ``_run`` pushes and pops it directly, as a
    method call would cost more than the heap operation itself.)
    """

    __slots__ = ("heap", "arrivals", "rank")

    def __init__(self, rank: dict | None = None) -> None:
        self.heap: list = []
        self.arrivals = itertools.count()
        #: the learner's order (node -> position) while ``autograd.order`` is plugged
        self.rank = rank

    def push(self, node: Any) -> None:
        key = -node.sequence if self.rank is None else self.rank[node]
        heapq.heappush(self.heap, (key, next(self.arrivals), node))

    def __len__(self) -> int:
        return len(self.heap)


#: The seam for tools that time backward node by node (``tg.profiler``): when set (it is
#: only while the observer of ``Function.apply`` is set too), each node's backward runs as
#: ``node_observer(node, grads, call_backward)``, which returns ``call_backward(node, grads)``.
node_observer: Callable[[Any, list, Callable[[Any, list], list]], list] | None = None


def _run(roots: list, deps: dict[Any, int], rank: dict | None, retain_graph: bool,
         records: bool = True) -> Iterator[BackwardStep | None]:
    """The steps of backprop. With ``rank`` (a checked topological order: node ->
    position) the ready node earliest in it runs next, which is that order itself."""
    buffers: dict[Any, list] = {}  # node -> the gradients arrived so far, one per output
    ready = _ReadyQueue(rank)
    heap, arrivals = ready.heap, ready.arrivals
    queued: set[int] = set()
    for node, nr, g in roots:
        buf = buffers.setdefault(node, [None] * node.num_outputs)
        buf[nr] = g if buf[nr] is None else buf[nr] + g
        if deps.get(node, 0) == 0 and id(node) not in queued:
            queued.add(id(node))
            ready.push(node)
    # Formulas marked ``formula_on_arrays`` run on numpy arrays unless a tool watches
    # every operation. Without step records, a gradient passed between two such nodes
    # (or into a leaf) even stays an array: no tensor is made for it, since nobody
    # looks at it (a node with hooks gets tensors, and records show tensors).
    on_arrays = function.observer is None
    keep_arrays = on_arrays and not records
    # A tool that times each node's backward (the profiler); read once per pass
    watch_node = node_observer
    # Gradient arrays in a buffer that nothing else holds, by id (a new array from a
    # ``fresh_gradients`` node, or a sum the engine made): two gradients for one input are
    # added into such an array in place, and a leaf keeps it as its .grad uncopied (see
    # _accumulate). The value keeps the array alive, so its id cannot pass to another
    # array meanwhile; None marks an array met twice, owned by no one.
    owned: dict[int, Any] = {}
    # Of those, the ones built from disjoint pieces of one dimension (split's, chunk's):
    # id -> Pieces, so the next piece's gradient is added into its slice (see autograd/pieces.py)
    pieces: dict[int, Pieces] = {}

    index = 0
    while heap:
        node = heappop(heap)[2]
        grads = buffers.pop(node)
        if owned and type(node) is not AccumulateGrad:
            disown(grads, owned, pieces)  # (its backward may pass them on: no longer ours)
        if node._pre_hooks:
            grads = _run_pre_hooks(node, _as_tensors(node, grads))
        if type(node) is AccumulateGrad:
            g = grads[0]
            mine = bool(owned) and owned.pop(id(g), None) is g
            if mine and pieces:
                pieces.pop(id(g), None)
            _accumulate(node.variable, g, mine)
            if node._post_hooks:
                for hook in list(node._post_hooks):  # e.g. DDP: this gradient is ready to send
                    hook(node.variable)
            yield BackwardStep(index, node, tuple(grads), leaf=node.variable, rule=node.rule,
                               pending=len(heap)) if records else None
            index += 1
            continue

        if watch_node is not None:
            grad_inputs = watch_node(node, grads, _call_backward)
        elif on_arrays and node.on_arrays:
            if pieces and node.function.gradient_block is not None \
                    and add_piece(node, grads[0], buffers, owned, pieces):
                grad_inputs = SENT_ALREADY  # (added into its input's gradient in place)
            else:
                grad_inputs = _formula_on_arrays(node, grads, keep_arrays)
        else:
            grad_inputs = _call_backward(node, grads)
        if not retain_graph:
            node.ctx._saved = None  # what it saved is no longer needed
            node.ctx._out = None  # nor the output it kept (tanh's): its memory can go
        accumulated = [] if records else None
        for (nxt, nr), g, meta in zip(node.next_functions, grad_inputs, node.input_meta):
            if nxt is None:
                if records:
                    accumulated.append(False)
                continue
            buf = buffers.get(nxt)
            if buf is None:
                buf = buffers[nxt] = [None] * nxt.num_outputs
            if records:
                accumulated.append(g is not None and buf[nr] is not None)
            if g is not None:
                if keep_arrays and nxt.on_arrays and not nxt._pre_hooks:
                    if type(g) is not ndarray:  # (a tensor from a formula run on tensors)
                        g = g._array
                    held = buf[nr]
                    if held is None:
                        buf[nr] = g
                        if node.function.fresh_gradients and g.base is None:
                            own_new(node, g, owned, pieces)
                    else:
                        buf[nr] = merged(held, g, owned, pieces)
                else:
                    _send_tensor(buf, nr, nxt, g, node.ctx, meta)
            left = deps[nxt] - 1
            deps[nxt] = left
            if left == 0:
                if g is None and all(b is None for b in buf):
                    buffers.pop(nxt)  # no gradient reached it: it has nothing to do
                    _release_unreached(nxt, deps, buffers, ready)
                else:
                    heappush(heap, (-nxt.sequence if rank is None else rank[nxt],
                                    next(arrivals), nxt))  # ready.push(nxt)
        yield BackwardStep(index, node, tuple(grads), tuple(grad_inputs), tuple(accumulated),
                           rule=node.rule, pending=len(heap)) if records else None
        index += 1


def _send_tensor(buf: list, nr: int, nxt: Any, g: Any, ctx: Any, meta: tuple) -> None:
    """Put gradient ``g`` (a tensor, or an array from a formula run on arrays: made a tensor
    of ``ctx``'s backend on the input's device, ``meta[2]``) into ``nxt``'s buffer ``buf``
    at output ``nr``, added to what is there (made a tensor too if it is an array)."""
    if type(g) is ndarray:
        g = function.Tensor._make(g, ctx.backend, meta[2])
    held = buf[nr]
    if held is not None and type(held) is ndarray:
        held = buf[nr] = _tensor_for(nxt, nr, held)
    buf[nr] = g if held is None else _add_grads(held, g)


@on_tensors_device
def _add_grads(held: "Tensor", new: "Tensor") -> "Tensor":
    """``held + new`` for two gradients of one input (``x * x``, or ``x`` used twice).

    Both were already checked to have the input's shape, dtype and device, so
    this asks the backend directly instead of going through ``held + new``
    (which would check them all again); the sum is a new tensor, never written
    in place, since one gradient tensor may travel along several edges.
    """
    backend = held._backend
    return function.Tensor._make(backend.binary("add", held._array, new._array), backend,
                                 held.device)


def _tensor_for(node: Any, nr: int, g: Any) -> "Tensor":
    """An array gradient kept for output ``nr`` of ``node`` (a node that computes on
    arrays, or a leaf) as a tensor: the node's backend and device, or the leaf's."""
    if type(node) is AccumulateGrad:
        leaf = node.variable
        return function.Tensor._make(g, leaf._backend, leaf.device)
    return function.Tensor._make(g, node.ctx.backend, node.output_meta[nr][2])


def _as_tensors(node: Any, grads: list) -> list:
    """The gradients arrived at ``node``, every one a tensor (for hooks, which take tensors)."""
    return [g if g is None or type(g) is not ndarray else _tensor_for(node, nr, g)
            for nr, g in enumerate(grads)]


def _release_unreached(node: Any, deps: dict, buffers: dict, ready: _ReadyQueue) -> None:
    """A node that received only ``None`` still counts as done for its inputs."""
    for nxt, _ in node.next_functions:
        if nxt is None:
            continue
        deps[nxt] -= 1
        if deps[nxt] == 0:
            if nxt in buffers and any(b is not None for b in buffers[nxt]):
                ready.push(nxt)
            else:
                buffers.pop(nxt, None)
                _release_unreached(nxt, deps, buffers, ready)


def _run_pre_hooks(node: Any, grads: list) -> list:
    for nr, hooks in node._pre_hooks.items():
        # retain_grad's hook goes last, so .grad shows what the other hooks made of it
        for hook in sorted(hooks, key=lambda h: getattr(h, "retains_grad", False)):
            if grads[nr] is None:
                continue
            new = hook(grads[nr])
            if new is not None and not isinstance(new, function.Tensor):
                raise TypeError(f"a gradient hook returned a {type(new).__name__}: a hook must "
                                "return a tensor (the new gradient) or None")
            if new is not None:
                grads[nr] = new.detach()
    return grads


_LOW_PRECISION = frozenset(dtypes.LOW_PRECISION)
_FLOAT32 = dtypes.float32.numpy


def _widened(grads: list) -> list:
    """16-bit gradients as float32: a 16-bit operation's backward then computes in float32
    (its saved 16-bit inputs promote) and each result is rounded once, when it is cast
    to its input's dtype below, as PyTorch's 16-bit backward kernels do."""
    return [g if g is None or g.dtype not in _LOW_PRECISION else
            function.Tensor._make(g._backend.astype(g._array, _FLOAT32), g._backend, g.device)
            for g in grads]


def _call_backward(node: Node, grads: list) -> list:
    device = getattr(node.ctx, "device", None)
    if device is not None and device.index is not None and device.index != current_index():
        with using(device.index):  # the device guard: backward runs where forward ran
            return _call_backward(node, grads)
    # (a node with one output runs only once that output has a gradient)
    if len(grads) > 1 and node.ctx.materialize_grads and any(g is None for g in grads):
        # an output nobody used: its gradient is zeros
        grads = [g if g is not None else _filled(shape, 0, dtype, device)
                 for g, (shape, dtype, device) in zip(grads, node.output_meta)]
    if node.output_meta[0][1] in _LOW_PRECISION:
        grads = _widened(grads)
        node.ctx._widen = True
    previous = grad_mode._enabled
    grad_mode._enabled = False  # a backward's own tensor operations are not recorded
    try:
        out = node.function.backward(node.ctx, *grads)
    finally:
        grad_mode._enabled = previous
    if type(out) is not tuple:
        out = (out,)
    if len(out) != len(node.next_functions):
        out = _trim(node, out)
    checked = list(out)
    metas = node.input_meta
    for i, g in enumerate(out):
        if g is None:
            continue
        if node.next_functions[i][0] is None:
            checked[i] = None  # nobody takes this gradient
            continue
        shape, dtype, device = metas[i]
        if not (type(g) is function.Tensor and g._array.shape == shape and g.dtype is dtype
                and g.device is device):  # (the usual case: already as the input needs it)
            checked[i] = _validate(node, i, g)
    return checked


def _formula_on_arrays(node: Node, grads: list, keep_arrays: bool) -> list:
    """Run ``node``'s backward formula on the backend arrays of its gradient and saved
    inputs (``Function.formula_on_arrays``); the gradients it returns stay arrays when
    ``keep_arrays`` (``_run`` makes tensors of them where they are needed) or become
    tensors, as any backward's are.

    The formula is the same code that runs on tensors; on numpy arrays each ``*`` is one
    numpy call instead of a tensor operation, and the numbers are the same, since the
    numpy backend's primitives are those very calls.
    """
    ctx = node.ctx
    ctx._arrays = True
    previous = grad_mode._enabled
    grad_mode._enabled = False  # (as for any backward: nothing it does is recorded)
    try:
        if len(grads) == 1:  # (one output: the usual case, without a list to make)
            g = grads[0]
            out = node.function.backward(ctx, g if type(g) is ndarray else g._array)
        else:
            out = node.function.backward(
                ctx, *[g if g is None or type(g) is ndarray else g._array for g in grads])
    finally:
        ctx._arrays = False
        grad_mode._enabled = previous
    if type(out) is not tuple:
        out = (out,)
    edges = node.next_functions
    if len(out) != len(edges):
        out = _trim(node, out)
    checked = list(out)
    metas = node.input_meta
    i = 0
    for g in out:
        if g is not None:
            if edges[i][0] is None:
                checked[i] = None  # nobody takes this gradient
            else:
                shape, dtype, device = metas[i]
                if type(g) is ndarray and g.shape == shape and g.dtype is dtype.numpy:
                    if not keep_arrays:
                        checked[i] = function.Tensor._make(g, ctx.backend, device)
                else:
                    g = _checked_tensor(node, i, g)
                    checked[i] = g._array if keep_arrays else g
        i += 1
    return checked


def _checked_tensor(node: Node, i: int, g: Any) -> "Tensor":
    """Gradient ``i`` from a formula run on arrays that is not already an array of its
    input's shape and dtype (a scalar, a broadcast shape, another dtype, a tensor), as a
    tensor checked and summed back to that shape as any backward's gradient is."""
    if not isinstance(g, function.Tensor):
        g = function.Tensor._make(asarray(g), node.ctx.backend, node.ctx.device)
    return _validate(node, i, g)


def _trim(node: Node, out: tuple) -> tuple:
    """``out`` with one gradient per input: PyTorch tolerates extra trailing Nones (for
    non-tensor arguments); anything else is an error naming the node."""
    n_in = len(node.next_functions)
    if len(out) > n_in and all(g is None for g in out[n_in:]):
        return out[:n_in]
    raise RuntimeError(
        f"{_who(node)} returned {len(out)} gradients, but its forward took "
        f"{n_in} inputs: backward must return one gradient (or None) per input"
    )


def _validate(node: Node, i: int, g: Any) -> Any:
    """Gradient ``i`` as its input needs it: summed back to the input's shape, in its dtype."""
    if not isinstance(g, function.Tensor):
        raise TypeError(
            f"{_who(node)} returned a {type(g).__name__} as gradient {i}: "
            "gradients must be tensors (or None)"
        )
    shape, dtype, device = node.input_meta[i]
    if g.device is not device and g.device != device:
        raise RuntimeError(
            f"{_who(node)} returned a gradient on {g.device} for input {i}, "
            f"which lives on {device}"
        )
    if g._array.shape != shape:
        g = _sum_to_shape(g, shape, node, i)
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g


@on_tensors_device
def _accumulate(leaf: "Tensor", grad: Any, owned: bool = False) -> None:
    """``leaf.grad += grad``, keeping the ``.grad`` object and never aliasing ``grad``
    (a tensor, or a backend array of the leaf's own backend) unless it is ``owned``: a
    new row-major array that nothing else holds, which the leaf's first gradient may be
    as it is (for a large weight the copy would cost about as much as its update)."""
    if type(grad) is ndarray:
        array, backend, device = grad, leaf._backend, leaf.device
    else:
        array, backend, device = grad._array, grad._backend, grad.device
    held = leaf._grad
    if held is None:
        if not (owned and array.flags.c_contiguous):
            array = _own_copy(array, backend)
        grad = function.Tensor._make(array, backend, device)
        if array.shape == leaf._array.shape and grad.dtype is leaf.dtype and device is leaf.device:
            leaf._grad = grad  # (what the setter would check: already so)
        else:
            leaf.grad = grad  # (the setter's error, should the leaf have changed since)
    else:
        held._set_array(held._backend.binary("add", held._array, array))


def _own_copy(array: Any, backend: Any) -> Any:
    """A row-major (C-contiguous) copy of a gradient's array that nothing else holds.

    A gradient can be a transposed view (the backward of ``W.T``); stored as is,
    every optimizer step would walk it against the parameter's layout, slowly.
    """
    dense = backend.contiguous(array)
    return dense if dense is not array else backend.astype(dense, dense.dtype)


def run_backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool = False) -> None:
    """Backpropagate to the end: what ``tensor.backward()`` and ``tg.autograd.backward`` do.

    Nobody reads step records here. When no leaf has a hook, no tool watches every
    operation and the learner's ``autograd.order`` is not plugged in, the steps run in
    :func:`_run_to_end`. Otherwise the generator the stepper drives runs to its end (by
    a ``deque`` that keeps nothing: a loop in C).
    """
    roots = _roots(tensors, grad_tensors)
    if function.hooked_leaves == 0 and function.observer is None and ORDER.fn is None:
        _run_to_end(roots, retain_graph)
    else:
        deps = _dependencies(roots)
        rank = None if ORDER.fn is None else _learners_order(roots, deps)
        deque(_run(roots, deps, rank, retain_graph, records=False), maxlen=0)


def _run_to_end(roots: list, retain_graph: bool) -> None:
    """The steps of ``backward()`` when no leaf has a hook: the nodes in the order
    :func:`_run` runs them, on the same numbers, in one loop and without counting
    dependencies first.

    ``_run`` runs, among the nodes whose gradients are complete, the one made last.
    That is the node made last among all the nodes still to run: every node that sends
    it a gradient was made after it, so has run already. So this loop keeps no counts:
    a node joins the heap with its first gradient and runs when it is the latest made
    in the heap. A leaf's accumulator, which ``_run`` runs as soon as its gradient is
    complete, runs here at the end, each in the order its first gradient came: with no
    hook on any leaf nothing can tell the difference. A node whose saved tensors an
    earlier backward freed is refused when its turn comes (before any leaf's ``.grad``
    changes), as PyTorch refuses it.

    Formulas marked ``formula_on_arrays`` run on the arrays (their gradients stay arrays
    between such nodes and into a leaf), any other runs on tensors through
    :func:`_call_backward`; owned arrays and split's pieces are handled as in ``_run``.
    """
    buffers: dict[Any, list] = {}  # node -> the gradients arrived so far, one per output
    heap: list = []  # (-sequence, arrival, node)
    arrivals = itertools.count()
    for node, nr, g in roots:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.num_outputs
            if type(node) is Node:
                heappush(heap, (-node.sequence, next(arrivals), node))
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    owned: dict[int, Any] = {}  # (as in _run)
    pieces: dict[int, Pieces] = {}
    enabled = grad_mode._enabled  # (backward may run inside no_grad: restored at the end)
    grad_mode._enabled = False  # no backward formula is recorded (hooks run with it as it was)
    try:
        _run_nodes(heap, arrivals, buffers, owned, pieces, retain_graph, enabled)
    finally:
        grad_mode._enabled = enabled
    for leaf in list(buffers):  # (what is left: the leaves' accumulators)
        g = buffers.pop(leaf)[0]  # (each buffer let go once added: one copy at a time)
        if g is not None:
            mine = bool(owned) and owned.pop(id(g), None) is g
            _accumulate(leaf.variable, g, mine)
        g = None


def _run_nodes(heap: list, arrivals: Any, buffers: dict, owned: dict, pieces: dict,
               retain_graph: bool, enabled: bool) -> None:
    """:func:`_run_to_end`'s loop over the nodes (grad mode off), the leaves left out."""
    while heap:
        node = heappop(heap)[2]
        ctx = node._ctx or node  # (node.ctx written out)
        if ctx._saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        grads = buffers.pop(node)
        if owned:  # (its backward may pass them on: no longer ours)
            if len(grads) == 1:  # (disown written out for one output)
                g = grads[0]
                if owned.pop(id(g), None) is not None and pieces:
                    pieces.pop(id(g), None)
            else:
                disown(grads, owned, pieces)
        if node._pre_hooks:
            grad_mode._enabled = enabled
            try:
                grads = _run_pre_hooks(node, _as_tensors(node, grads))
            finally:
                grad_mode._enabled = False
        unchecked = False  # True for a formula's own result, which the loop below checks
        if not node.on_arrays:
            grad_inputs = _call_backward(node, grads)
        elif pieces and node.function.gradient_block is not None \
                and add_piece(node, grads[0], buffers, owned, pieces):
            grad_inputs = SENT_ALREADY
        elif len(grads) == 1:  # _formula_on_arrays written out for one output (the usual case)
            g = grads[0]
            ctx._arrays = True
            try:
                grad_inputs = node.function.backward(ctx, g if type(g) is ndarray else g._array)
            finally:
                ctx._arrays = False
            if type(grad_inputs) is not tuple:
                grad_inputs = (grad_inputs,)
            if len(grad_inputs) != len(node.next_functions):
                grad_inputs = _trim(node, grad_inputs)
            unchecked = True
        else:
            grad_inputs = _formula_on_arrays(node, grads, True)
        if not retain_graph:
            ctx._saved = None  # what it saved is no longer needed
            ctx._out = None  # nor the output it kept (tanh's): its memory can go
        i = -1
        for (nxt, nr), g, meta in zip(node.next_functions, grad_inputs, node.input_meta):
            i += 1
            if g is None or nxt is None:
                continue
            if unchecked and not (type(g) is ndarray and g.shape == meta[0]
                                  and g.dtype is meta[1].numpy):
                g = _checked_tensor(node, i, g)._array
            buf = buffers.get(nxt)
            if buf is None:
                buf = buffers[nxt] = [None] * nxt.num_outputs
                if type(nxt) is Node:
                    heappush(heap, (-nxt.sequence, next(arrivals), nxt))
            # the array kept, as _run keeps it (written out here, not a call: a call per
            # edge would cost this loop 3% on a small graph)
            if nxt.on_arrays and not nxt._pre_hooks:
                if type(g) is not ndarray:  # (a tensor from a formula run on tensors)
                    g = g._array
                held = buf[nr]
                if held is None:
                    buf[nr] = g
                    if node.function.fresh_gradients and g.base is None:
                        own_new(node, g, owned, pieces)
                else:
                    buf[nr] = merged(held, g, owned, pieces)
            else:
                _send_tensor(buf, nr, nxt, g, ctx, meta)
