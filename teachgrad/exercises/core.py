"""The checking framework behind every exercise in the chapters.

An exercise in a notebook is two cells: one the learner fills in (tagged
``solution`` in the reference edition, where it holds the reference answer),
then a check cell that hands the learner's function to a checker::

    def tensor_core_tflops(sms, tensor_cores_per_sm, clock_ghz):
        ...                                  # the learner's code

    ch01.check_tensor_core_tflops(tensor_core_tflops)

A checker runs **real tests on the learner's code** (values against numpy,
gradients against finite differences, edge cases) and prints one friendly
message:

* ``✅ Exercise 1.2 solved: ...`` when every test passes;
* ``❌ Exercise 1.2 not quite: ...`` naming the input that failed, what was
  expected, what came back, and a hint;
* ``⏳ Exercise 1.2 not solved yet: fill in the cell above`` when the learner's
  code raises ``NotImplementedError`` (the stub of the learner edition). This
  never raises, so the learner edition runs top to bottom without crashing.

Writing a checker
-----------------
A checker is a function in ``teachgrad/exercises/chNN.py`` that calls
:func:`check` with a list of :class:`Test` objects. A test is a description of
the input plus a function that exercises the learner's code and raises
:class:`Mismatch` when the answer is wrong. The helpers :func:`expect_close`,
:func:`expect_equal` and :func:`expect_true` raise it for you::

    def check_relu(relu) -> Feedback:
        def on(values):
            def run():
                got = relu(tg.tensor(values))
                expect_close(got, np.maximum(values, 0), hint="negative inputs become 0")
            return Test(f"x = {values}", run)

        return check("2.1", [on([1.0, -2.0]), on([0.0])], solved="relu matches numpy")

:func:`check_function` covers the common case "call ``fn(*args)`` on a few inputs
and compare with the expected value", and :func:`numerical_gradient` gives
central-difference gradients to compare a backward against.

Every checker returns its :class:`Feedback` (``.passed``, ``.status``,
``.message``) so tests can assert on it; in a notebook the message is printed
once and the returned object displays nothing more.

Exercise rule for notebook authors: the learner fills in **functions or
classes**, never bare statements, so that the learner edition can replace each
body by ``raise NotImplementedError`` (see :mod:`teachgrad.exercises.edition`)
and still run top to bottom.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

SOLVED, NOT_SOLVED_YET, WRONG, ERROR = "solved", "not solved yet", "wrong", "error"


@dataclass
class Feedback:
    """The result of checking one exercise.

    Attributes:
        exercise: the exercise number, e.g. ``"3.2"``.
        status: ``"solved"``, ``"not solved yet"``, ``"wrong"`` (a test failed)
            or ``"error"`` (the learner's code raised an exception).
        message: the full text shown to the learner.
        failed_input: the description of the input that failed, if any.
        tests_run: how many tests ran (the failing one included).
    """

    exercise: str
    status: str
    message: str
    failed_input: str | None = None
    tests_run: int = 0

    @property
    def passed(self) -> bool:
        return self.status == SOLVED

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    def _ipython_display_(self) -> None:
        # The checker already printed the message; showing it again would repeat it.
        pass


class Mismatch(Exception):
    """Raised by a test when the learner's answer is wrong.

    Args:
        problem: what went wrong, in one sentence (``"wrong value"``).
        expected: what a correct answer gives (shown to the learner).
        got: what the learner's code gave.
        hint: a nudge towards the fix.
    """

    def __init__(self, problem: str, expected: Any = None, got: Any = None, hint: str = "",
                 show_values: bool = True) -> None:
        super().__init__(problem)
        self.problem = problem
        self.expected = expected
        self.got = got
        self.hint = hint
        self.show_values = show_values


@dataclass
class Test:
    """One test: ``description`` names the input, ``run`` raises :class:`Mismatch` on failure."""

    description: str
    run: Callable[[], None]
    hint: str = ""  # used when ``run`` raises an unexpected exception

    __test__ = False  # not a pytest test class, despite the name


@dataclass
class Case:
    """An input for :func:`check_function`: positional args, the expected value, a hint."""

    description: str
    args: tuple
    expected: Any
    hint: str = ""
    kwargs: dict = field(default_factory=dict)


# --- turning values into readable text ---------------------------------------------------

def to_numpy(value: Any) -> Any:
    """A teachgrad tensor (any device) as a numpy array; other values unchanged."""
    if hasattr(value, "numpy") and hasattr(value, "requires_grad"):
        return value.detach().cpu().numpy()
    return value


def describe(value: Any) -> str:
    """Short, deterministic text for a value (no memory addresses, 4 significant digits)."""
    value = to_numpy(value)
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            text = np.array2string(value, separator=", ")
        else:
            text = np.array2string(value, precision=4, separator=", ", suppress_small=True,
                                   threshold=12, edgeitems=3)
        return f"{text} (shape {list(value.shape)})" if value.ndim else text
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, (list, tuple)) and len(value) <= 8:
        inner = ", ".join(describe(v) for v in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if value is None or isinstance(value, (bool, int, str, np.integer)):
        return repr(value)
    return type(value).__name__


# --- expectations: raise Mismatch with the evidence ---------------------------------------

def expect_close(got: Any, expected: Any, *, hint: str = "", rtol: float = 1e-4,
                 atol: float = 1e-5, what: str = "value") -> None:
    """Raise :class:`Mismatch` unless ``got`` matches ``expected`` in shape and value."""
    if got is None:
        raise Mismatch(f"your code returned None instead of a {what}", expected, got,
                       hint or "did you forget a `return`?")
    got_np = np.asarray(to_numpy(got), dtype=np.float64)
    expected_np = np.asarray(to_numpy(expected), dtype=np.float64)
    if got_np.shape != expected_np.shape:
        raise Mismatch(f"wrong shape of the {what}: expected {list(expected_np.shape)}, "
                       f"got {list(got_np.shape)}", expected, got, hint)
    if not np.allclose(got_np, expected_np, rtol=rtol, atol=atol, equal_nan=False):
        if not np.all(np.isfinite(got_np)) and np.all(np.isfinite(expected_np)):
            raise Mismatch(f"your {what} contains inf or nan", expected, got, hint)
        raise Mismatch(f"wrong {what}", expected, got, hint)


def expect_equal(got: Any, expected: Any, *, hint: str = "", what: str = "value") -> None:
    """Raise :class:`Mismatch` unless ``got == expected`` exactly (ints, shapes, strings)."""
    got_plain = to_numpy(got)
    same = (np.array_equal(got_plain, expected) if isinstance(got_plain, np.ndarray)
            else got_plain == expected)
    if not same:
        raise Mismatch(f"wrong {what}", expected, got, hint)


def expect_true(condition: bool, problem: str, *, hint: str = "") -> None:
    """Raise :class:`Mismatch` with ``problem`` when ``condition`` is false."""
    if not condition:
        raise Mismatch(problem, hint=hint, show_values=False)


# --- running the tests -----------------------------------------------------------------------

def _not_filled_in(candidate: Any) -> bool:
    return candidate is None or candidate is Ellipsis


def _format_failure(exercise: str, test: Test, err: Mismatch) -> str:
    lines = [f"❌ Exercise {exercise} not quite: {err.problem}",
             f"   input:    {test.description}"]
    if err.show_values:
        lines.append(f"   expected: {describe(err.expected)}")
        lines.append(f"   got:      {describe(err.got)}")
    if err.hint:
        lines.append(f"   hint:     {err.hint}")
    return "\n".join(lines)


def _format_error(exercise: str, test: Test, err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first_line = text[0] if text else ""
    lines = [f"❌ Exercise {exercise}: your code raised {type(err).__name__}: {first_line}",
             f"   input:    {test.description}"]
    if test.hint:
        lines.append(f"   hint:     {test.hint}")
    return "\n".join(lines)


#: The latest verdict of each exercise checked in this process (what progress() reports).
_LATEST: dict[str, str] = {}


def latest_verdicts() -> dict[str, str]:
    """Exercise number -> the status of its latest check in this process."""
    return dict(_LATEST)


def check(exercise: str, tests: Iterable[Test], *, solved: str, candidate: Any = True,
          quiet: bool = False) -> Feedback:
    """Run ``tests`` in order, stop at the first failure, print and return the feedback.

    Args:
        exercise: the exercise number shown in the message (``"3.2"``).
        tests: the tests; each names its input and raises :class:`Mismatch` when wrong.
        solved: what the learner achieved, for the success line.
        candidate: the learner's object; ``None`` or ``...`` counts as not filled in.
        quiet: do not print (tests use it to inspect the message instead).

    A ``NotImplementedError`` from the learner's code means the exercise is not
    solved yet; any other exception is reported with the input that caused it.
    Nothing here raises, so a notebook always runs on.
    """
    feedback = None
    count = 0
    if _not_filled_in(candidate):
        feedback = Feedback(exercise, NOT_SOLVED_YET, _not_yet(exercise))
    else:
        for test in tests:
            count += 1
            try:
                test.run()
            except NotImplementedError:
                feedback = Feedback(exercise, NOT_SOLVED_YET, _not_yet(exercise), tests_run=count)
            except Mismatch as err:
                feedback = Feedback(exercise, WRONG, _format_failure(exercise, test, err),
                                    test.description, count)
            except Exception as err:  # the learner's code crashed: report it, do not raise
                feedback = Feedback(exercise, ERROR, _format_error(exercise, test, err),
                                    test.description, count)
            if feedback is not None:
                break
        if feedback is None:
            feedback = Feedback(exercise, SOLVED, f"✅ Exercise {exercise} solved: {solved}",
                                tests_run=count)
    _LATEST[exercise] = feedback.status
    if not quiet:
        print(feedback.message)
    return feedback


def _not_yet(exercise: str) -> str:
    return f"⏳ Exercise {exercise} not solved yet: fill in the cell above"


def check_function(exercise: str, fn: Callable, cases: Sequence[Case], *, solved: str,
                   rtol: float = 1e-4, atol: float = 1e-5, exact: bool = False,
                   what: str = "result", quiet: bool = False) -> Feedback:
    """Call ``fn(*case.args)`` for each case and compare with ``case.expected``.

    Floats (and arrays, tensors) are compared with a tolerance; ``exact=True``
    asks for equality (counts, shapes, booleans).
    """
    def make_test(case: Case) -> Test:
        def run() -> None:
            got = fn(*case.args, **case.kwargs)
            if exact:
                expect_equal(got, case.expected, hint=case.hint, what=what)
            else:
                expect_close(got, case.expected, hint=case.hint, rtol=rtol, atol=atol, what=what)
        return Test(case.description, run, case.hint)

    if not callable(fn) and not _not_filled_in(fn):
        message = (f"❌ Exercise {exercise}: expected a function, got a "
                   f"{type(fn).__name__}. Pass the function itself, without calling it.")
        _LATEST[exercise] = ERROR
        if not quiet:
            print(message)
        return Feedback(exercise, ERROR, message)
    return check(exercise, [make_test(c) for c in cases], solved=solved, candidate=fn, quiet=quiet)


def numerical_gradient(f: Callable[[np.ndarray], float], x: np.ndarray,
                       eps: float = 1e-6) -> np.ndarray:
    """Central differences of a scalar function of a float64 array: (f(x+h) - f(x-h)) / 2h."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + eps
        up = f(x.copy())
        x[index] = old - eps
        down = f(x.copy())
        x[index] = old
        grad[index] = (up - down) / (2 * eps)
    return grad


# --- evidence about *how* the learner's code got its answer ----------------------------------

def unseen_rng() -> np.random.Generator:
    """A generator seeded afresh on every call: inputs the learner cannot have seen.

    Every checker tests on a few such inputs after the fixed ones it shows, so
    an answer hard-coded for the visible cases (a lookup table) fails.
    """
    return np.random.default_rng()


@dataclass
class OpCall:
    """One teachgrad operation that ran: its Function class, how deep inside
    another Function's forward it ran (0: called directly), and its outputs."""

    function: type
    depth: int
    outputs: tuple


@contextlib.contextmanager
def watching_ops() -> Iterator[list[OpCall]]:
    """Record every ``Function.apply`` that runs inside, through the engine's observer seam."""
    from ..autograd import function as fn_module

    calls: list[OpCall] = []
    outer = fn_module.observer
    depth = [0]

    def observe(cls: type, args: tuple, kwargs: dict) -> Any:
        record = OpCall(cls, depth[0], ())
        calls.append(record)
        depth[0] += 1
        try:
            result = outer(cls, args, kwargs) if outer is not None else cls._apply(*args, **kwargs)
        finally:
            depth[0] -= 1
        record.outputs = result if isinstance(result, tuple) else (result,)
        return result

    fn_module.observer = observe
    try:
        yield calls
    finally:
        fn_module.observer = outer


@contextlib.contextmanager
def counting_backward() -> Iterator[list[int]]:
    """Count the backward passes started inside (``loss.backward()`` or
    ``tg.autograd.backward``); yields ``[count]``."""
    import importlib

    from .. import autograd

    tensor = importlib.import_module("teachgrad.tensor")  # the module (tg.tensor is a function)
    original = autograd.run_backward
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    autograd.run_backward = tensor.run_backward = counted
    try:
        yield count
    finally:
        autograd.run_backward = tensor.run_backward = original
