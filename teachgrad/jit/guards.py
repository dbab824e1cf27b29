"""Guards: what a compiled graph assumed when it was traced, checked before each call.

A trace records one call, so its graph is right only for calls that look like that
one. ``tg.compile`` writes down what the graph assumed, as :class:`Guard` s, and
checks them (cheaply: a comparison each) before it reuses the graph; when one fails
it traces and compiles again, as ``torch.compile`` does. What is guarded:

* the inputs' signature: shapes, dtypes, devices, requires_grad (the cache key);
* grad mode (also in the key);
* each captured tensor (parameter, buffer, tensor from a closure): its requires_grad,
  and its version (in-place changes) where the graph baked its value in: a pass
  folded it into a constant, or the trace read it with ``.item()`` or ``bool()``;
* each module of the model: ``training``, which parameter, buffer and submodule
  object sits at each name, and its plain attributes (numbers, strings, flags);
* the plain values (numbers, strings, tuples of them), tensors and modules that the
  function reads from its closure and globals, and from the plain Python functions
  it calls.

A captured tensor the graph only *reads* is read live on every call, so changing
it in place (an optimizer step) needs no recompiling.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Iterator

from ..autograd import grad_mode
from ..tensor import Tensor
from .ir import Graph

PLAIN = (int, float, complex, str, bool, bytes, type(None))
HELPER_DEPTH = 3  # how deep to follow plain functions the compiled function calls


class Guard:
    """One assumption: ``holds()`` is checked on each call; ``why()`` says what changed."""

    def __init__(self, description: str, read: Callable[[], Any], expected: Any,
                 same: Callable[[Any, Any], bool], fast: tuple = ()) -> None:
        self.description = description
        self.read, self.expected, self.same = read, expected, same
        self.fast = fast  # how GuardSet checks it without a call: ("entry", dict, key), ...

    def holds(self) -> bool:
        try:
            return self.same(self.read(), self.expected)
        except (KeyError, AttributeError, ValueError):  # the name (or cell) is gone
            return False

    def why(self) -> str:
        try:
            now = _show(self.read())
        except (KeyError, AttributeError, ValueError):
            now = "gone"
        return f"{self.description}: was {_show(self.expected)}, now {now}"

    def shown(self) -> str:
        """The expected value, short."""
        return _show(self.expected)

    def __repr__(self) -> str:
        return f"Guard({self.description} == {self.shown()})"


def _show(value: Any) -> str:
    if isinstance(value, (Tensor, types.FunctionType)) or hasattr(value, "_parameters"):
        return f"<{type(value).__name__} object {id(value):#x}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _identical(a: Any, b: Any) -> bool:
    return a is b


def _equal(a: Any, b: Any) -> bool:
    """Same type and value (1, 1.0 and True give different graphs: 1 / 2 is not 1.0 / 2)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)  # (NaN equals itself here)


def _is_plain(value: Any, depth: int = 0) -> bool:
    if isinstance(value, PLAIN):
        return True
    if isinstance(value, (tuple, list)) and depth < 2 and len(value) <= 64:
        return all(_is_plain(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 2 and len(value) <= 64:
        return all(isinstance(k, PLAIN) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


def _snapshot(value: Any) -> Any:
    """A copy of a plain value that later changes to the original cannot reach."""
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return value


# -- the inputs and grad mode: the cache key ------------------------------------------

def signature(inputs: tuple[Tensor, ...]) -> tuple:
    """What the key of a compiled graph says about its inputs, and grad mode."""
    return (tuple([(t._array.shape, t.dtype.name, str(t.device), t.requires_grad)
                   for t in inputs]), grad_mode._enabled)


def describe_signature(key: tuple, names: list[str]) -> list[str]:
    inputs, grad_enabled = key
    lines = [f"input {name!r}: shape {list(shape)}, {dtype}, {device}, requires_grad={rg}"
             for name, (shape, dtype, device, rg) in zip(names, inputs)]
    return lines + [f"grad mode: {'enabled' if grad_enabled else 'disabled (no_grad)'}"]


# -- captured tensors ----------------------------------------------------------------

def tensor_guards(graph: Graph, baked: set[str], labels: dict[int, str] | None = None) -> list[Guard]:
    """requires_grad of every captured tensor; the version of those the graph baked in
    (``baked``: by the passes, or ``graph.baked``: read into Python while tracing).
    ``labels`` names a tensor the graph calls ``constant0`` as the function does."""
    written = {target for target, _ in graph.writes}
    baked = baked | graph.baked
    guards = []
    for target in sorted(graph.captured):
        t = graph.constants[target]
        label = (labels or {}).get(id(t), target)
        guards.append(Guard(f"{label}.requires_grad", lambda t=t: t.requires_grad,
                            t.requires_grad, _identical, ("requires_grad", t)))
        if target in baked and target not in written:
            guards.append(Guard(f"{label} unchanged in place (its version)",
                                lambda t=t: t._version_counter[0], t._version_counter[0], _equal,
                                ("version", t)))
    return guards


# -- modules ------------------------------------------------------------------------

def module_guards(module: Any, prefix: str = "model") -> list[Guard]:
    """``training``, the objects at each name, and the plain attributes of every submodule."""
    guards = []
    for name, m in module.named_modules():
        where = f"{prefix}.{name}" if name else prefix
        state = vars(m)
        for registry in ("_parameters", "_buffers", "_modules"):
            entries = state[registry]
            for key, obj in entries.items():
                guards.append(Guard(f"{where}.{key} is the object it was", lambda e=entries, k=key: e[k],
                                    obj, _identical, ("entry", entries, key)))
        for key, value in state.items():  # training, and numbers and flags such as eps
            if not key.startswith("_") and _is_plain(value):
                guards.append(Guard(f"{where}.{key}", lambda s=state, k=key: s[k], _snapshot(value),
                                    _equal, ("entry", state, key)))
    return guards


# -- closures and globals -------------------------------------------------------------

def _is_users(fn: Any) -> bool:
    """A plain Python function outside teachgrad (its own code is not the user's state)."""
    module = getattr(fn, "__module__", None) or ""
    return isinstance(fn, types.FunctionType) and not module.startswith("teachgrad")


def _names_read(code: types.CodeType) -> Iterator[str]:
    """The global names ``code`` (and the functions and comprehensions inside it) reads."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_read(const)


def _guard_value(name: str, description: str, read: Callable[[], Any], value: Any,
                 seen: set[int], depth: int, fast: tuple = ()) -> list[Guard]:
    """Guards for one value the function reads by name."""
    if _is_plain(value):
        return [Guard(description, read, _snapshot(value), _equal, fast)]
    if isinstance(value, Tensor):
        return [Guard(f"{description} is the tensor it was", read, value, _identical, fast)]
    if hasattr(value, "named_modules") and hasattr(value, "_parameters"):  # an nn.Module
        if id(value) in seen:
            return []
        seen.add(id(value))
        return [Guard(f"{description} is the module it was", read, value, _identical, fast),
                *_module_and_its_code(value, name, seen)]
    if _is_users(value) and depth < HELPER_DEPTH:
        return [Guard(f"{description} is the function it was", read, value, _identical, fast),
                *function_guards(value, seen, depth + 1)]
    return []


def function_guards(fn: Any, seen: set[int] | None = None, depth: int = 0) -> list[Guard]:
    """Guards for what a Python function reads from its closure and its globals."""
    seen = set() if seen is None else seen
    fn = getattr(fn, "__func__", fn)  # a bound method: its function
    if not isinstance(fn, types.FunctionType) or id(fn) in seen:
        return []
    seen.add(id(fn))
    guards: list[Guard] = []
    where = fn.__qualname__
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # not assigned yet
            continue
        guards += _guard_value(name, f"closure variable {name!r} of {where}",
                               lambda c=cell: c.cell_contents, value, seen, depth)
    namespace = fn.__globals__
    for name in dict.fromkeys(_names_read(fn.__code__)):
        if name in namespace:
            guards += _guard_value(name, f"global {name!r} of {where}", lambda n=name: namespace[n],
                                   namespace[name], seen, depth, ("entry", namespace, name))
    return guards


def _module_and_its_code(module: Any, name: str, seen: set[int]) -> list[Guard]:
    """A module's guards, and those of the ``forward`` methods a user wrote for it."""
    guards = module_guards(module, name)
    for m in module.modules():
        forward = getattr(type(m), "forward", None)
        if _is_users(forward):
            guards += function_guards(forward, seen)
    return guards


def collect(fn: Any, graph: Graph, baked: set[str] = frozenset()) -> list[Guard]:
    """Every guard of a compiled ``fn`` whose trace is ``graph`` and whose passes baked in
    the captured tensors ``baked`` (the input signature aside: it is the cache key)."""
    guards: list[Guard] = []
    seen: set[int] = set()
    owner = getattr(fn, "__self__", fn)  # a bound method's module
    if hasattr(owner, "named_modules") and hasattr(owner, "_parameters"):
        seen.add(id(owner))
        guards += _module_and_its_code(owner, "model", seen)
    else:
        guards += function_guards(fn, seen)
    suffix = " is the tensor it was"
    labels = {id(g.expected): g.description[:-len(suffix)] for g in guards
              if isinstance(g.expected, Tensor) and g.description.endswith(suffix)}
    return tensor_guards(graph, set(baked), labels) + guards


def first_failure(guards: list[Guard]) -> Guard | None:
    """The first guard that no longer holds (None: the graph is still right)."""
    for g in guards:
        if not g.holds():
            return g
    return None


_MISSING = object()


class GuardSet:
    """A list of guards checked as fast as plain Python allows: each kind in one tight loop
    (a dict lookup and an ``is``, mostly), instead of a call per guard. ``holds()`` is
    what every call of a compiled function pays for; :func:`first_failure` says why."""

    def __init__(self, guards: list[Guard]) -> None:
        self.guards = guards
        self.same_object: list[tuple[dict, Any, Any]] = []
        self.equal_value: list[tuple[dict, Any, Any]] = []
        self.requires_grad: list[tuple[Tensor, bool]] = []
        self.versions: list[tuple[list, int]] = []
        self.others: list[Guard] = []
        for g in guards:
            kind = g.fast[0] if g.fast else None
            if kind == "entry" and g.same is _identical:
                self.same_object.append((g.fast[1], g.fast[2], g.expected))
            elif kind == "entry" and isinstance(g.expected, PLAIN):
                self.equal_value.append((g.fast[1], g.fast[2], g.expected))
            elif kind == "requires_grad":
                self.requires_grad.append((g.fast[1], g.expected))
            elif kind == "version":
                self.versions.append((g.fast[1]._version_counter, g.expected))
            else:
                self.others.append(g)

    def holds(self) -> bool:
        for mapping, key, expected in self.same_object:
            if mapping.get(key, _MISSING) is not expected:
                return False
        for mapping, key, expected in self.equal_value:
            now = mapping.get(key, _MISSING)  # (the same object: equal, NaN included)
            if now is not expected and (type(now) is not type(expected) or now != expected):
                return False
        for t, expected in self.requires_grad:
            if t.requires_grad is not expected:
                return False
        for counter, expected in self.versions:
            if counter[0] != expected:
                return False
        return all(g.holds() for g in self.others)

    def __iter__(self) -> Iterator[Guard]:
        return iter(self.guards)

    def __len__(self) -> int:
        return len(self.guards)


__all__ = ["Guard", "GuardSet", "collect", "describe_signature", "first_failure", "function_guards",
           "module_guards", "signature", "tensor_guards"]
