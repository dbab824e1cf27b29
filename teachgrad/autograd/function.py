"""``Function`` and ``Context``: how one differentiable operation is defined.

A Function has a static ``forward`` (compute the result, save what backward
needs on ``ctx``) and a static ``backward`` (turn the gradient of the output
into one gradient per input). ``Function.apply`` runs forward and, when
recording, leaves behind a :class:`Node` in the graph that points at the nodes
of the inputs. That node is the tensor's ``grad_fn``.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable

import numpy as np

from .. import cuda_devices
from ..backends import get_backend
from ..backends.low_precision import LOW_NUMPY, low_precision, narrow
from ..backends.numpy_backend import kept_number
from ..device import CPU, Device, mismatch_error
from ..dtypes import LOW_PRECISION
from . import grad_mode

_FLOAT32 = np.dtype(np.float32)
_LOW_DTYPES = frozenset(LOW_PRECISION)

#: ``teachgrad.tensor.Tensor``, set by that module as soon as the class exists
#: (it imports this module, so this module cannot import it back at load time).
Tensor: Any = None

_new_object = object.__new__
_sequence = itertools.count()  # creation order of nodes: later nodes run first in backward
SMALL_OUTPUT = 16  # outputs with at most this many elements keep their values for the graph view
#: The modules whose ``forward`` is running now, outermost first (``nn.Module.__call__``
#: keeps it). Each node records it, so a graph view can group nodes by module.
module_path: tuple = ()
#: The one seam for tools that watch operations as they run (``tg.jit.trace``): when set,
#: ``Function.apply(*args, **kwargs)`` calls ``observer(cls, args, kwargs)`` instead and
#: returns what it returns; the observer runs the operation itself with ``cls._apply``.
observer: Callable[[type, tuple, dict], Any] | None = None
#: The seam autocast plugs into (``teachgrad/amp``): while set, ``Function._apply``
#: hands every operation to ``cast_policy.apply(cls, args, kwargs)``, which casts the
#: arguments the way its table says and runs ``cls._apply`` on them with itself unset
#: (an operation's insides are not cast again). Off, it costs one test of a global.
cast_policy: Any = None
#: Called with every node the graph records, when set (the memory timeline uses it to find
#: the tensors saved for backward). None: nothing is called.
node_made: Callable[[Any], None] | None = None

FREED_GRAPH_MESSAGE = (
    "Trying to backward through the graph a second time (or to use saved tensors after "
    "they were freed). The first backward() frees what each operation saved, to save memory. "
    "Fix: pass retain_graph=True to the first backward() if you need to go through the graph "
    "again, or recompute the forward pass."
)


class Context:
    """What ``forward`` leaves for ``backward``: saved tensors and any attributes.

    ``ctx.needs_input_grad[i]`` tells whether input ``i`` wants a gradient, so
    backward can skip work nobody asked for. ``ctx.out`` is for the forward's own
    result when backward reuses it: reading it back checks, as ``saved_tensors``
    does, that the output was not changed in place in between.
    """

    # Defaults live on the class: most operations never change them, and an
    # operation that does gets its own value on its own context.
    needs_input_grad: tuple[bool, ...] = ()
    materialize_grads = True
    _recording = True  # False when no graph is being recorded: saving is then skipped
    _saved: tuple | None = ()
    _saved_versions: tuple = ()
    _non_differentiable: frozenset[int] = frozenset()
    _out: Any = None
    _out_version: tuple | None = None  # (the output's version counter, its value when recorded)
    #: True for a 16-bit operation's context once backward runs: saved tensors and the
    #: output are handed back in float32, so its backward computes in float32 (the
    #: engine rounds each gradient to its input's dtype once, at the end)
    _widen = False
    #: True only while the engine runs a ``formula_on_arrays`` backward on backend arrays:
    #: then ``saved_tensors`` and ``output`` hand back arrays, as ``grad`` is one.
    _arrays = False

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` for backward (freed after it unless ``retain_graph``)."""
        if not self._recording:
            return  # nothing will run backward on this operation
        self._saved = tensors
        if len(tensors) == 2:  # (the commonest case, written out: it runs for most operations)
            a, b = tensors
            self._saved_versions = (a._version_counter[0] if isinstance(a, Tensor) else None,
                                    b._version_counter[0] if isinstance(b, Tensor) else None)
        else:
            self._saved_versions = tuple([t._version_counter[0] if isinstance(t, Tensor) else None
                                          for t in tensors])

    @property
    def saved_tensors(self) -> tuple:
        saved = self._saved
        if saved is None:
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        versions = self._saved_versions
        if len(saved) == 2:  # (the commonest case, written out: it runs for most backwards)
            a, b = saved
            va, vb = versions
            if (va is not None and a._version_counter[0] != va) or (
                    vb is not None and b._version_counter[0] != vb):
                self._changed_in_place(saved, versions)
            if self._arrays:  # (a Python float beside an array: numpy's kept 0-d array)
                if type(b) is float and isinstance(a, Tensor):
                    return a._array, kept_number(b, a._array.dtype)
                if type(a) is float and isinstance(b, Tensor):
                    return kept_number(a, b._array.dtype), b._array
                return (a._array if isinstance(a, Tensor) else a,
                        b._array if isinstance(b, Tensor) else b)
            return _widened(saved) if self._widen else saved
        self._changed_in_place(saved, versions)
        if self._arrays:
            return tuple([t._array if isinstance(t, Tensor) else t for t in saved])
        return _widened(saved) if self._widen else saved

    @staticmethod
    def _changed_in_place(saved: tuple, versions: tuple) -> None:
        """The error for a saved tensor changed in place since it was saved, if there is one."""
        for i, v in enumerate(versions):
            if v is not None and saved[i]._version_counter[0] != v:
                t = saved[i]
                raise RuntimeError(
                    f"one of the tensors needed for gradient computation (saved tensor {i}, "
                    f"shape {list(t.shape)}) was modified in place after it was saved "
                    f"(its version is {t._version}, expected {v}). Fix: use an out-of-place "
                    "operation (x = x + 1 instead of x += 1), or .clone() it first."
                )

    @property
    def out(self) -> Any:
        """The forward's own result (its backend array), kept when backward reuses it
        (``tanh``'s slope is ``1 - out²``). Checked like saved tensors: changing the
        output in place before backward is an error, not a wrong gradient."""
        if self._out is None and self._saved is None:  # a backward freed it already
            raise RuntimeError(FREED_GRAPH_MESSAGE)
        if self._out_version is not None:
            counter, expected = self._out_version
            if counter[0] != expected:
                raise RuntimeError(
                    f"one of the tensors needed for gradient computation (the output of this "
                    f"operation) was modified in place after it was computed (its version is "
                    f"{counter[0]}, expected {expected}). Fix: use an out-of-place operation "
                    "(y = y * 2 instead of y *= 2), or .clone() it first."
                )
        return self._out

    @out.setter
    def out(self, value: Any) -> None:
        self._out = value

    @property
    def one(self) -> Any:
        """The number 1 for a backward formula (``grad * (ctx.one - t * t)``): ``1.0``,
        or while the formula runs on numpy arrays the kept 0-d array of 1 in the output's
        dtype (the same bits: numpy would convert a Python 1 at every call, 0.7 µs), read
        only. (1.0 when the forward kept no output to take the dtype from.)"""
        out = self._out
        if self._arrays and out is not None:
            return kept_number(1.0, out.dtype)
        return 1.0

    @property
    def output(self) -> Any:
        """The forward's own result in the form backward computes with: a tensor, or
        its array while the engine runs the formula on arrays (``tanh``'s backward
        reads ``t = ctx.output`` then ``grad * (1 - t * t)`` either way)."""
        out = self._out
        version = self._out_version  # (``out``'s checks written out: one call, not two)
        if (out is None and self._saved is None) or (
                version is not None and version[0][0] != version[1]):
            out = self.out  # freed, or changed in place since: ``out`` raises its error
        if self._arrays:
            return out
        made = Tensor._make(out, self.backend, self.device)
        return _widened((made,))[0] if self._widen else made

    def mark_non_differentiable(self, *tensors: "Tensor") -> None:
        """Outputs listed here never require grad (e.g. the indices of ``max``)."""
        self._non_differentiable = self._non_differentiable | {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives ``None`` instead of zeros for unused outputs."""
        self.materialize_grads = value


class Node(Context):
    """One recorded operation in the graph (what ``tensor.grad_fn`` is).

    ``next_functions`` lists, in argument order, where each input's gradient
    goes: the input's own ``grad_fn``, an :class:`AccumulateGrad` for a leaf that
    requires grad, or ``None``. An input used twice appears twice.

    ``ctx`` is the :class:`Context` its Function's forward filled. An elementwise
    operation recorded by :func:`apply_plain` has the node itself as its context (one
    object per operation, not two, as PyTorch's nodes are their own ``ctx``).
    """

    __slots__ = ("function", "_ctx", "next_functions", "input_meta", "num_outputs",
                 "output_meta", "sequence", "_pre_hooks", "output_values", "module_path",
                 "constants", "on_arrays")

    def __init__(self, function: type["Function"], ctx: Context, edges: tuple, input_meta: tuple,
                 outputs: tuple, constants: tuple = (), on_arrays: bool = False) -> None:
        self.function = function
        self._ctx = ctx
        # whether the engine may run this node's backward formula on backend arrays:
        # the Function allows it, the backend's arrays compute like its primitives, and
        # every tensor input has one dtype (so array arithmetic promotes nothing)
        self.on_arrays = on_arrays
        # (argument position, value) of inputs that need no gradient: a Python number or a
        # small tensor's array, so a graph view can show `x * 3` with its 3
        self.constants = constants
        # (edges and input metas come from Function._apply's one pass over the inputs)
        self.next_functions: tuple[tuple[Any, int], ...] = edges
        self.input_meta = input_meta  # (shape, dtype, device), None for non-tensors
        self.num_outputs = len(outputs)
        if len(outputs) == 1:
            o = outputs[0]
            self.output_meta = ((o._array.shape, o.dtype, o.device),)
            # small outputs keep their values for the graph view
            self.output_values = (o._array if o._array.size <= SMALL_OUTPUT else None,)
        else:
            self.output_meta = tuple([_meta(o) for o in outputs])
            self.output_values = tuple([_small_values(o) for o in outputs])
        self.sequence = next(_sequence)
        self._pre_hooks: dict[int, list[Callable]] | None = None  # made on first use
        self.module_path = module_path  # the modules that were running when it was made

    @property
    def ctx(self) -> Context:
        """What forward saved for backward (this node itself when it was its own context)."""
        ctx = self._ctx
        return self if ctx is None else ctx

    @property
    def pre_hooks(self) -> dict[int, list[Callable]]:
        """Tensor hooks by output index (``tensor.register_hook``), made on first use."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return self._pre_hooks

    @pre_hooks.setter
    def pre_hooks(self, hooks: dict[int, list[Callable]]) -> None:
        self._pre_hooks = hooks

    def name(self) -> str:
        return self.function.__name__ + "Backward"

    @property
    def rule(self) -> str:
        """The derivative rule of this operation, as one line of text."""
        return self.function.rule or "(custom Function: see its backward)"

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad:
    """The end of the line for a leaf: adds the incoming gradient into ``.grad``."""

    __slots__ = ("variable", "_pre_hooks", "_post_hooks", "_counted", "sequence", "__weakref__")
    next_functions: tuple = ()
    num_outputs = 1
    rule = "leaf.grad += incoming grad"

    def __init__(self, variable: "Tensor") -> None:
        self.variable = variable
        self._pre_hooks: dict[int, list[Callable]] | None = None  # made on first use
        self._post_hooks: list[Callable] = []  # called with the leaf once .grad is updated
        self._counted: Any = None  # while hooked_leaves counts it: the finalizer that uncounts
        self.sequence = float("inf")  # leaves take their gradient as soon as it is ready

    @property
    def pre_hooks(self) -> dict[int, list[Callable]]:
        """Hooks on the leaf's gradient (``leaf.register_hook``), made on first use."""
        self._count()  # (whoever asks for the dict may add a hook to it)
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return self._pre_hooks

    @pre_hooks.setter
    def pre_hooks(self, hooks: dict[int, list[Callable]]) -> None:
        self._count()
        self._pre_hooks = hooks

    @property
    def post_hooks(self) -> list[Callable]:
        """Called with the leaf once its ``.grad`` is updated
        (``leaf.register_post_accumulate_grad_hook``)."""
        self._count()
        return self._post_hooks

    def _count(self) -> None:
        """Count this accumulator among those that may hold hooks, until it dies or its
        last hook is removed: ``backward()`` then runs each leaf's step as soon as its
        gradient is complete (``autograd/engine.py``), where with none it may add every
        leaf's at the end."""
        global hooked_leaves
        if self._counted is None:
            hooked_leaves += 1
            self._counted = weakref.finalize(self, _uncount)

    def _hooks_removed(self) -> None:
        """A hook was taken off (its handle's ``remove()``): stop counting this
        accumulator once it holds none."""
        if self._counted is not None and not self._post_hooks and not any(
                (self._pre_hooks or {}).values()):
            self._counted()  # (uncounts now, and never again)
            self._counted = None

    @property
    def on_arrays(self) -> bool:
        """Whether the engine may hand it a gradient as a numpy array: when the leaf's
        backend computes on numpy arrays itself (its add is then one backend call)."""
        return self.variable._backend.array_arithmetic

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


#: How many living leaf accumulators were handed hooks (or their hook lists): while none
#: was, no leaf can tell when its gradient arrives, and ``backward()`` adds them last.
hooked_leaves = 0


def _uncount() -> None:
    global hooked_leaves
    hooked_leaves -= 1


_NO_EDGE = (None, 0)


def _meta(arg: Any) -> tuple | None:
    """(shape, dtype, device) of a tensor argument, for checking the gradients it gets."""
    return (arg._array.shape, arg.dtype, arg.device) if isinstance(arg, Tensor) else None


def _small_values(output: Any) -> Any:
    """The array of a small output (the graph view shows its values), else None."""
    return output._array if output.numel() <= SMALL_OUTPUT else None


class _FunctionMeta(type):
    def __repr__(cls) -> str:
        return f"<Function {cls.__module__}.{cls.__name__}>"


class Function(metaclass=_FunctionMeta):
    """Base class of every differentiable operation, built-in or your own.

    Subclass it, write two static methods, then call ``YourFunction.apply(...)``::

        class Square(tg.autograd.Function):
            rule = "d(x²)/dx = 2x"

            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x          # runs without recording

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 2 * x   # one gradient per input of forward

    ``forward`` may return a tensor, a backend array (built-in ops do), or a tuple
    of them. ``backward`` returns one gradient (or ``None``) per forward input.
    """

    #: One-line derivative rule shown by the backprop stepper.
    rule: str = ""
    #: True for operations whose output can be a view of their first input (reshape,
    #: permute, ...): when it is, the two share a version counter.
    is_view: bool = False
    #: True when ``backward`` is written with operators only (``grad * b``,
    #: ``grad * (1 - t * t)``, ``g @ w``, ``.reshape``, ``.sum(0)``), reading its inputs
    #: through ``ctx.saved_tensors`` and ``ctx.output``: then the same formula gives the
    #: same numbers on tensors and on numpy arrays, and on a backend whose arrays compute
    #: like its primitives (``Backend.array_arithmetic``) the engine runs it on the arrays,
    #: a fraction of a microsecond per operation instead of a tensor operation each.
    formula_on_arrays: bool = False
    #: True when that formula also takes inputs of different dtypes (float scores and
    #: integer targets): it then runs on arrays for those too, not only for one dtype.
    arrays_of_any_dtype: bool = False
    #: True when every gradient the formula returns is a new array that nothing else holds
    #: (a matrix product, a sum) or a view of one, never an incoming gradient or a saved
    #: input passed on. A leaf may then keep such an array (not a view) as its ``.grad``
    #: without the copy the engine otherwise makes (PyTorch's AccumulateGrad takes such a
    #: gradient over, too).
    fresh_gradients: bool = False
    #: For a view that reads one block of its first input (a piece of ``split``): a static
    #: method ``(ctx) -> (dim, start, stop)`` naming the positions ``start:stop`` along
    #: ``dim`` (all of every other dimension), or None when it reads anything else. The
    #: engine then adds the pieces' gradients into one array, each into its own block,
    #: instead of one zero-filled array per piece added up (``autograd/pieces.py``).
    gradient_block: Callable[[Context], tuple | None] | None = None
    #: False for a Function whose float32 result from 16-bit inputs is meant (a cast):
    #: any other rounds its floating-point result to its inputs' 16-bit dtype, once.
    rounds_low_precision: bool = True

    @staticmethod
    def forward(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx: Context, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define a static backward(ctx, grad)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} is used through its class: call "
            f"{type(self).__name__}.apply(...), not {type(self).__name__}(...)"
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on the arguments; when recording, leave a Node for backward."""
        if observer is not None:
            return observer(cls, args, kwargs)
        return cls._apply(*args, **kwargs)

    @classmethod
    def _apply(cls, *args: Any, **kwargs: Any) -> Any:
        """``apply`` itself, with no observer (what an observer calls to run the op)."""
        if cast_policy is not None:  # autocast is on: it casts, then calls back with it off
            return cast_policy.apply(cls, args, kwargs)
        # One pass over the arguments: their common device (an error naming both if there
        # are two), the backend that computes on them, which ones want a gradient and,
        # when recording, where each one's gradient will go (the node's edges).
        recording = grad_mode._enabled
        device = backend = dtype = None
        one_dtype = True
        needs, edges, metas, constants = [], [], [], []
        for a in args:
            if isinstance(a, Tensor):
                if device is None:
                    device, backend, dtype = a.device, a._backend, a.dtype
                else:
                    if a.device is not device and a.device != device:
                        raise mismatch_error(device, a.device, cls.__name__)
                    if a.dtype is not dtype:
                        one_dtype = False
                needs.append(a.requires_grad)
                if recording:
                    constants += _constant(len(edges), a)
                    edges.append(_edge(a))
                    metas.append((a._array.shape, a.dtype, device))
            else:
                needs.append(False)
                if recording:
                    if type(a) is float:  # a number in the formula (ints are dims, sizes)
                        constants.append((len(edges), a))
                    edges.append(_NO_EDGE)
                    metas.append(None)
        if device is None:  # no tensor arguments at all
            device = CPU
            backend = get_backend(device.type)
        elif device.index is not None and device.index != cuda_devices.current_index():
            with cuda_devices.using(device.index):  # the device guard: run on the tensors' device
                return cls._apply(*args, **kwargs)
        ctx = Context()
        ctx.needs_input_grad = needs = tuple(needs)
        ctx.backend = backend
        ctx.device = device
        low = None
        if (dtype in _LOW_DTYPES or not one_dtype) and cls.rounds_low_precision:
            low = _low_precision(dtype, one_dtype, args)
            if low is not None:  # 16-bit inputs: forward computes in float32 (rounded below)
                ctx.backend = low_precision(backend, rounds=False)

        record = recording and True in needs
        if not record:
            ctx._recording = False  # (then save_for_backward keeps nothing)
        if not recording:
            # The lean path: nothing is recorded (inside no_grad, and every backward
            # formula's own operations). No mode to switch, no node to make.
            raw = cls.forward(ctx, *args, **kwargs)
        else:
            grad_mode._enabled = False  # forward's own tensor operations are not recorded
            try:
                raw = cls.forward(ctx, *args, **kwargs)
            finally:
                grad_mode._enabled = True
        if low is not None:
            raw = _rounded(raw, ctx, backend, low)
        if type(raw) is not tuple and not cls.is_view and not isinstance(raw, Tensor):
            outputs = Tensor._make(raw, backend, device)  # the usual case: one new array
        else:
            outputs = _outputs(cls, raw, device, backend, args)
        if record:
            produced = outputs if type(outputs) is tuple else (outputs,)
            _record(Node(cls, ctx, tuple(edges), tuple(metas), produced, tuple(constants),
                         (one_dtype or cls.arrays_of_any_dtype) and cls.formula_on_arrays
                         and backend.array_arithmetic),
                    ctx, produced)
        return outputs


# apply_plain's needs_input_grad, one tuple each (made once: nothing changes them)
_NEEDS_ONE, _NEEDS_NONE = (True,), (False,)
_NEEDS_BOTH, _NEEDS_FIRST = (True, True), (True, False)
_NEEDS_SECOND, _NEEDS_NEITHER = (False, True), (False, False)
_NO_VALUES = (None,)  # a large output's output_values


def apply_plain(cls: type[Function], args: tuple, like: Any) -> Any:
    """``cls._apply(*args)`` while recording, for the lean path's plain operands only.

    ``args`` are one or two operands of an elementwise Function with one output:
    ``like`` (a floating-point tensor) and, if two, a Python float or a tensor of
    ``like``'s dtype, shape and device (``autograd/lean.py`` checked that). Nothing
    then needs comparing or promoting, and every tensor among them has the output's
    (shape, dtype, device), so this makes the same Context, output and Node as
    ``_apply`` does, straight through, without its general loop.
    """
    backend, device = like._backend, like.device
    if device.index is not None and device.index != cuda_devices.current_index():
        with cuda_devices.using(device.index):  # the device guard, as in _apply
            return apply_plain(cls, args, like)
    # the node is its own context (see Node): made first, for forward to fill
    ctx = node = _new_object(Node)
    ctx.backend = backend
    ctx.device = device
    unary = len(args) == 1
    if unary:
        needs = _NEEDS_ONE if like.requires_grad else _NEEDS_NONE
    else:
        a, b = args
        if type(a) is not float and a.requires_grad:
            needs = _NEEDS_BOTH if type(b) is not float and b.requires_grad else _NEEDS_FIRST
        else:
            needs = _NEEDS_SECOND if type(b) is not float and b.requires_grad else _NEEDS_NEITHER
    ctx.needs_input_grad = needs
    if True not in needs:  # nothing to record: forward alone, as _apply would
        ctx._recording = False
        return Tensor._make_as(cls.forward(ctx, *args), like)
    grad_mode._enabled = False  # forward's own tensor operations are not recorded
    try:
        array = cls.forward(ctx, *args)
    finally:
        grad_mode._enabled = True
    if array.dtype is like._array.dtype:  # (Tensor._make_as written out, as a node's output)
        out = _new_object(Tensor)
        out._array = array
        out.device = device
        out.dtype = like.dtype
        out._backend = backend
        out.requires_grad = True
        out._grad = None
        out.grad_fn = node
        out._output_nr = 0
        out._version_counter = [0]
        out._accumulate_node = None
        out._retains_grad = False
    else:  # (a 16-bit result: _make_as would find the dtypes differ, and call this)
        out = Tensor._make(array, backend, device)
        out.grad_fn = node
        out.requires_grad = True
    # every tensor operand's (shape, dtype, device) too (see above); one tuple of it serves
    # as the input and output metas, which nothing changes
    meta = (array.shape, out.dtype, device)
    metas = (meta,)
    # its fields written out as Node.__init__ writes them (and _edge, _constant for the
    # commonest operands: an operand that needs a gradient is no constant, and its edge
    # is its grad_fn or, for a leaf, its accumulator)
    if unary:
        node.next_functions = ((like.grad_fn, like._output_nr) if like.grad_fn is not None
                               else _edge(like),)
        node.input_meta = metas
        node.constants = ()
    elif needs is _NEEDS_BOTH:  # `y * w`, `z - s`
        node.next_functions = (
            (a.grad_fn, a._output_nr) if a.grad_fn is not None
            else (a._accumulate_node or a._accumulator(), 0),
            (b.grad_fn, b._output_nr) if b.grad_fn is not None
            else (b._accumulate_node or b._accumulator(), 0))
        node.input_meta = (meta, meta)
        node.constants = ()
    elif type(b) is float:  # `z * 0.5`, `z + 0.1` (so `a` needs the gradient)
        node.next_functions = ((a.grad_fn, a._output_nr) if a.grad_fn is not None
                               else (a._accumulate_node or a._accumulator(), 0), _NO_EDGE)
        node.input_meta = (meta, None)
        node.constants = ((1, b),)
    else:
        node.next_functions = (_edge(a), _edge(b))
        node.input_meta = (None if type(a) is float else meta, None if type(b) is float else meta)
        node.constants = _constant(0, a) + _constant(1, b)
    node.function = cls
    node._ctx = None
    node.num_outputs = 1
    node.output_meta = metas
    node.output_values = (array,) if array.size <= SMALL_OUTPUT else _NO_VALUES
    node.sequence = next(_sequence)
    node._pre_hooks = None
    node.module_path = module_path
    node.on_arrays = cls.formula_on_arrays and backend.array_arithmetic
    if ctx._out is not None:  # backward will read the output: watch its version
        ctx._out_version = (out._version_counter, 0)
    if node_made is not None:
        node_made(node)
    return out


def apply_one(cls: type[Function], a: Any, rest: tuple) -> Any:
    """``cls._apply(a, *rest)`` for the lean path's whole-tensor reductions (``x.sum()``,
    ``loss.mean()``): one float32 or float64 tensor ``a`` (nothing to round to a 16-bit
    dtype, no second device) and arguments ``rest`` that are neither tensors nor Python
    floats (dims, flags: no edges, no constants). This makes the same Context, output and
    Node as ``_apply``, without its general pass over the arguments.
    """
    backend, device = a._backend, a.device
    if device.index is not None and device.index != cuda_devices.current_index():
        with cuda_devices.using(device.index):  # the device guard, as in _apply
            return apply_one(cls, a, rest)
    ctx = Context()
    ctx.backend = backend
    ctx.device = device
    wanted = a.requires_grad
    ctx.needs_input_grad = (wanted,) + (False,) * len(rest)
    if not (wanted and grad_mode._enabled):  # nothing to record: forward alone, as _apply
        ctx._recording = False
        return Tensor._make(cls.forward(ctx, a, *rest), backend, device)
    grad_mode._enabled = False  # forward's own tensor operations are not recorded
    try:
        raw = cls.forward(ctx, a, *rest)
    finally:
        grad_mode._enabled = True
    out = (Tensor._make(raw, backend, device),)
    nothing = (None,) * len(rest)
    _record(Node(cls, ctx, (_edge(a),) + (_NO_EDGE,) * len(rest),
                 ((a._array.shape, a.dtype, device),) + nothing, out, (),
                 cls.formula_on_arrays and backend.array_arithmetic), ctx, out)
    return out[0]


def _widened(saved: tuple) -> tuple:
    """``saved`` with each 16-bit tensor as a float32 one (exact: float32 holds them all)."""
    return tuple([Tensor._make(t._backend.astype(t._array, _FLOAT32), t._backend, t.device)
                  if isinstance(t, Tensor) and t._array.dtype in LOW_NUMPY else t for t in saved])


def _low_precision(dtype: Any, one_dtype: bool, args: tuple) -> Any:
    """The 16-bit numpy dtype among the tensor arguments, if there is one."""
    if dtype is not None and dtype.numpy in LOW_NUMPY:
        return dtype.numpy
    if not one_dtype:
        for a in args:
            if isinstance(a, Tensor) and a.dtype.numpy in LOW_NUMPY:
                return a.dtype.numpy
    return None


def _rounded(raw: Any, ctx: Context, backend: Any, low: Any) -> Any:
    """A forward's float32 result rounded to the 16-bit dtype ``low``, once (its ``ctx.out``
    too, which backward reads as the output)."""
    base = getattr(backend, "base", backend)
    out = ctx._out
    if type(raw) is tuple:
        rounded = tuple([r if isinstance(r, Tensor) else narrow(base, r, low) for r in raw])
        if out is not None:
            ctx._out = rounded[0] if out is raw[0] else narrow(base, out, low)
        return rounded
    if isinstance(raw, Tensor):
        return raw
    rounded = narrow(base, raw, low)
    if out is not None:
        ctx._out = rounded if out is raw else narrow(base, out, low)
    return rounded


def _constant(i: int, a: Any) -> tuple:
    """``((i, value),)`` when operand ``i`` is a constant of the formula (a Python float, or
    a small tensor that needs no gradient) for the graph view to show, else ``()``."""
    if type(a) is float:
        return ((i, a),)
    if not a.requires_grad and a._array.size <= SMALL_OUTPUT:
        return ((i, a._array),)
    return ()


def _edge(a: Any) -> tuple:
    """Where the gradient of operand ``a`` goes: its node, its leaf's accumulator, or nowhere."""
    if type(a) is float:
        return _NO_EDGE
    if a.grad_fn is not None:
        return (a.grad_fn, a._output_nr)
    if a.requires_grad:
        return (a._accumulate_node or a._accumulator(), 0)
    return _NO_EDGE


def _outputs(cls: type[Function], raw: Any, device: Device, backend: Any, args: tuple) -> Any:
    """The output tensor(s) from what forward returned; a view shares its input's version."""
    if type(raw) is tuple:
        outputs = tuple([_as_output(o, device, backend, args) for o in raw])
        first = outputs[0]
    else:
        outputs = first = _as_output(raw, device, backend, args)
    if cls.is_view and backend.shares_memory(first._array, args[0]._array):
        # a view: an in-place change through either one changes both
        first._version_counter = args[0]._version_counter
    return outputs


def _as_output(out: Any, device: Device, backend: Any, inputs: tuple) -> Any:
    """A fresh output tensor from what forward returned (a backend array or a tensor)."""
    if not isinstance(out, Tensor):  # an array made by ``backend`` (built-in operations)
        return Tensor._make(out, backend, device)
    if any(out is a for a in inputs):  # forward returned an input: give it a new handle
        return Tensor._make(out._array, out._backend, out.device)
    return out.detach() if out.grad_fn is not None or out.requires_grad else out


def _record(node: Node, ctx: Context, outputs: tuple) -> None:
    """Make ``node`` the outputs' ``grad_fn`` (each floating-point output that may have one)."""
    if ctx._out is not None:  # backward will read the first output: watch its version
        counter = outputs[0]._version_counter
        ctx._out_version = (counter, counter[0])
    if node_made is not None:
        node_made(node)
    skip = ctx._non_differentiable
    for i, o in enumerate(outputs):
        if o.dtype.is_floating_point and not (skip and id(o) in skip):
            o.grad_fn = node
            o.requires_grad = True
            o._output_nr = i


class FunctionCtx(Context):
    """Alias kept for code written against ``torch.autograd.function.FunctionCtx``."""
