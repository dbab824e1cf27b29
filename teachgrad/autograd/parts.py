"""The engine's replaceable parts: where a learner's own function can run instead.

Each seam of the engine declares one :class:`Part` here: its name, what it
receives, what it must return, and the engine's own implementation. While a
learner's function is plugged into a part (``tg.exercises.plug``), the engine
calls that function instead, checks what it returns, and everything built on the
part (``backward()``, the stepper, ``gradcheck``, a training loop) runs on it.

Nothing is paid when nothing is plugged: a seam reads one attribute
(``part.fn is None``) once per backward or optimizer update (and the backward loop
tests one local, ``rank is None``, per node it schedules), or, for an
operation's backward formula, nothing at all (plugging swaps the ``backward``
of that one Function class and unplugging puts the original back).

Parts declared here and by the engine's other seams: ``autograd.order``,
``autograd.sum_to_shape``, ``backward:<Op>`` for any built-in operation
(``backward:Mul``, ``backward:MatMul``, ``backward:Sum`` ...), ``optim.sgd_step``,
``optim.adam_step``, ``cuda.map`` / ``cuda.reduce`` / ``cuda.matmul`` (kernels/parts.py),
the compiler's passes ``compile.*`` (jit/pass_parts.py), ``tune.promote``
(tune/promotion.py) and ``distributed.ring_all_reduce`` (distributed/collectives.py).

This module sits beside the engine (imports point down): the engine declares its
parts here, and :mod:`teachgrad.exercises` offers the learner-facing API on top.
"""
from __future__ import annotations

import contextlib
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

#: How the learner's functions are named in messages ("in your autograd.order (plugged with ...").
PLUGGED_WITH = "plugged with tg.exercises.plug"


class PartError(RuntimeError):
    """A learner's plugged function raised, or returned something the engine cannot use.

    ``part`` is the part's name. When the learner's code raised, the original
    exception is chained (``__cause__``) and the message points at the learner's line.
    """

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part


@dataclass(eq=False)
class Part:
    """One replaceable part of the engine.

    Attributes:
        name: e.g. ``"autograd.order"``.
        receives: what the learner's function is called with (one line, for messages/docs).
        returns: what it must return.
        engine: the engine's own implementation (the same signature).
        fn: the learner's function while one is plugged, else ``None`` (the seams test it).
        calls: how many times ``fn`` ran since it was plugged (checkers read it).
    """

    name: str
    receives: str
    returns: str
    engine: Callable
    fn: Callable | None = None
    calls: int = 0
    #: For parts whose seam is a swap (an operation's backward): called with the learner's
    #: function on plug, and with None on unplug.
    install: Callable[[Callable | None], None] | None = field(default=None, repr=False)

    def call(self, *args: Any) -> Any:
        """Run the plugged function; an exception in it becomes a :class:`PartError`
        naming this part and the learner's line, with the original chained."""
        fn = self.fn if self.fn is not None else self.engine
        self.calls += 1
        try:
            return fn(*args)
        except (PartError, NotImplementedError):
            raise  # (NotImplementedError: the learner edition's stub, "not solved yet")
        except Exception as error:
            raise PartError(self.name, f"in your {self.name} ({PLUGGED_WITH}): "
                            f"{type(error).__name__}: {error}{_where(error, fn)}") from error

    def reject(self, got: str, expected: str) -> PartError:
        """The error for a result the engine cannot use: what came back, what was expected."""
        return PartError(self.name, f"your {self.name} ({PLUGGED_WITH}) returned {got}; "
                                    f"expected {expected} (what the part receives and "
                                    f"returns: tg.exercises.parts()[{self.name!r}])")


def _where(error: BaseException, fn: Callable) -> str:
    """`` (at file, line N: `code`)`` for the deepest frame of the learner's own file."""
    frames = traceback.extract_tb(error.__traceback__)
    code = getattr(fn, "__code__", None)
    own = [f for f in frames if code is not None and f.filename == code.co_filename]
    frame = own[-1] if own else (frames[-1] if len(frames) > 1 else None)
    if frame is None:
        return ""
    line = f": `{frame.line.strip()}`" if frame.line else ""
    return f" (at {os.path.basename(frame.filename)}, line {frame.lineno}{line})"


_PARTS: dict[str, Part] = {}


def declare(name: str, *, receives: str, returns: str, engine: Callable,
            install: Callable[[Callable | None], None] | None = None) -> Part:
    """Declare one of the engine's parts (once, where its seam lives); returns it."""
    if name in _PARTS:
        raise ValueError(f"the part {name!r} is already declared")
    part = _PARTS[name] = Part(name, receives, returns, engine, install=install)
    return part


def get(name: str) -> Part:
    """The part called ``name`` (``backward:<Op>`` parts are declared on first use)."""
    if not isinstance(name, str):
        raise TypeError(f"a part is named by a string, e.g. 'autograd.order', "
                        f"not a {type(name).__name__}")
    part = _PARTS.get(name)
    if part is None and name.startswith("backward:"):
        part = _backward_part(name)
    if part is None:
        raise KeyError(f"there is no part called {name!r}. The parts: "
                       f"{', '.join(names())}")
    return part


def names() -> list[str]:
    """Every part's name (``backward:<Op>`` stands for any built-in operation)."""
    return sorted(n for n in _PARTS if not n.startswith("backward:")) + ["backward:<Op>"]


def plugged_parts() -> dict[str, Callable]:
    """The parts that run a learner's function now: name -> function."""
    return {name: part.fn for name, part in _PARTS.items() if part.fn is not None}


def plug(name: str, fn: Callable) -> Part:
    """Run ``fn`` instead of the engine's part ``name`` until :func:`unplug`."""
    part = get(name)
    if not callable(fn):
        raise TypeError(f"plug({name!r}, ...) needs a function, not a {type(fn).__name__}")
    if part.install is not None:
        part.install(fn)
    part.fn, part.calls = fn, 0
    return part


def unplug(name: str) -> None:
    """Put the engine's own part ``name`` back (nothing happens if it was not plugged)."""
    part = get(name)
    if part.fn is not None and part.install is not None:
        part.install(None)
    part.fn = None


@contextlib.contextmanager
def plugged(name: str, fn: Callable) -> Iterator[Part]:
    """``with plugged(name, fn):`` runs ``fn`` as part ``name`` inside the block only
    (whatever was plugged before comes back afterwards, even on an error)."""
    part = get(name)
    before = part.fn
    plug(name, fn)
    try:
        yield part
    finally:
        unplug(name)
        if before is not None:
            plug(name, before)


# --- one operation's backward formula --------------------------------------------------

def _function_named(op: str) -> type | None:
    """The built-in Function class called ``op`` (a subclass defined in teachgrad)."""
    from .function import Function  # (this layer: no climb)
    stack, found = list(Function.__subclasses__()), []
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if cls.__name__ == op and cls.__module__.startswith("teachgrad."):
            found.append(cls)
    return found[0] if len(found) == 1 else None


def _backward_part(name: str) -> Part | None:
    """Declare ``backward:<Op>``: plugging swaps that Function's ``backward`` for one that
    calls the learner's function on tensors and checks what it returns."""
    op = name.split(":", 1)[1]
    cls = _function_named(op)
    if cls is None:
        return None
    own = cls.__dict__.get("backward")  # (None: inherited from a parent Function)
    original = own if own is not None else staticmethod(cls.backward)
    # the engine's shortcuts that trust the built-in formula (its gradients are new arrays;
    # a split piece's gradient goes into its block): off while the learner's runs instead
    trusted = {name: cls.__dict__[name] for name in ("fresh_gradients", "gradient_block")
               if name in cls.__dict__}

    def install(fn: Callable | None) -> None:
        if fn is not None:
            cls.backward = staticmethod(_learners_backward(part))
            cls.fresh_gradients, cls.gradient_block = False, None
            return
        if own is not None:
            cls.backward = own
        else:
            del cls.backward  # the parent's again
        for name in ("fresh_gradients", "gradient_block"):
            if name in trusted:
                setattr(cls, name, trusted[name])
            elif name in cls.__dict__:
                delattr(cls, name)  # (inherited again)

    part = declare(name, receives=f"(ctx, grad) as {op}.backward does: ctx.saved_tensors "
                                  "and the other ctx fields its forward stored",
                   returns=f"one gradient (a tensor, or None) per input of {op}'s forward, "
                           "shaped like that input or broadcastable to it",
                   engine=original.__func__ if isinstance(original, staticmethod) else original,
                   install=install)
    return part


def _learners_backward(part: Part) -> Callable:
    """A ``backward(ctx, *grads)`` that runs the learner's formula on tensors."""
    def backward(ctx: Any, *grads: Any) -> Any:
        arrays = ctx._arrays
        if arrays:  # (the engine runs this formula on arrays: the learner's gets tensors)
            from .function import Tensor
            ctx._arrays = False
            grads = tuple(g if g is None else Tensor._make(g, ctx.backend, ctx.device)
                          for g in grads)
        try:
            out = part.call(ctx, *grads)
        finally:
            ctx._arrays = arrays
        from .function import Tensor
        for i, g in enumerate(out if type(out) is tuple else (out,)):
            if g is not None and not isinstance(g, Tensor):
                raise part.reject(f"a {type(g).__name__} as gradient {i}",
                                  "a tensor (or None) for every input")
        return out
    return backward
