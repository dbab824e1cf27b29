"""Checkers for chapter 11, *Static graphs and compilers*: a traceable rewrite of a
data-dependent ``if`` (11.1), finding the inputs a trace gets wrong (11.2), and two compiler
passes that then run inside ``tg.compile`` (11.3 dead code, 11.4 common subexpressions:
:mod:`.passes`). The expected answers are computed from the engine at check time."""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np

import teachgrad as tg
from teachgrad.jit import Graph, TracerWarning, TracingError
from teachgrad.jit.interpreter import run
from teachgrad.jit.traced import trace_graph

from ..core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy
from .passes import (check_common_subexpression_elimination,  # noqa: F401
                     check_dead_code_elimination, random_program, two_outputs)

# -- 11.1 a data-dependent choice the trace can keep ----------------------------------------

def eager_choice(x: tg.Tensor) -> tg.Tensor:
    """The eager version: an ``if`` on a value (a trace bakes one branch in)."""
    if x.sum() > 0:
        return x.tanh()
    return x * 0.5


def _quarters(rng: np.random.Generator, shape: tuple, kind: str) -> np.ndarray:
    """Multiples of 1/4 (exact in float32, so a sum of 0 is exactly 0) with a chosen sum.

    ``kind``: "positive" / "negative" (all one sign), "zero" (mixed signs, sum exactly 0),
    "mixed negative" (largest value positive, sum negative) or "mixed positive".
    """
    size = int(np.prod(shape))
    magnitudes = rng.integers(1, 9, size=size) * 0.25
    if kind in ("positive", "negative"):
        values = magnitudes * (1.0 if kind == "positive" else -1.0)
    else:
        values = magnitudes * np.where(np.arange(size) % 2 == 0, 1.0, -1.0)
        target = {"zero": 0.0, "mixed negative": -0.25, "mixed positive": 0.25}[kind]
        # the last element makes the sum exactly the target; the others keep both signs
        values[-1] = target - values[:-1].sum()
        if kind == "mixed positive":
            values[0] = -abs(values[0]) - 2.0
            values[-1] = target - values[:-1].sum()
    return rng.permutation(values).reshape(shape).astype(np.float32)


def _choice_hint(kind: str, swapped_everywhere: bool) -> str:
    if swapped_everywhere:
        return "the branches are swapped: tg.where(cond, when_true, when_false)"
    if kind == "zero":
        return "the sum is exactly 0 here, and 0 > 0 is False: eager_choice returns x * 0.5"
    if kind.startswith("mixed"):
        return ("the test is the sum of all of x against 0 (x.sum() > 0): not one element, "
                "not the largest, not another threshold")
    return "tanh(x) when x.sum() > 0, else x * 0.5"


def _trace_without_branches(fn: Callable, example: tg.Tensor) -> Graph:
    """Trace ``fn``; a baked-in branch or a graph break becomes a Mismatch naming it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        try:
            return trace_graph(fn, (example,))
        except TracerWarning:
            raise Mismatch("tracing warned that a branch was baked in", "no warning",
                           "a TracerWarning", "no Python if on a tensor: compute both "
                           "branches and pick with tg.where(x.sum() > 0, ...)") from None
        except TracingError as e:
            raise Mismatch("tracing stopped: .item() (or .numpy(), .tolist()) left the "
                           "tensor world", "a graph", str(e).split(".")[0],
                           "no .item(): keep the test as a tensor (x.sum() > 0) and pass it "
                           "to tg.where") from None


KINDS = ("positive", "negative", "mixed negative", "mixed positive", "zero")


def check_traceable_choice(traceable_choice: Callable) -> Feedback:
    """Exercise 11.1: the same function as ``eager_choice``, correct under tracing.

    The graph is traced on one example and run on inputs of every kind: one sign, a sum
    of exactly 0 (a ``>=`` answer fails there), and mixed signs whose largest value and
    sum disagree (a test on ``x.max()`` or ``x[0]`` fails there).
    """

    def make(example_kind: str, shape: tuple, seed: int) -> Test:
        def run_test() -> None:
            rng = np.random.default_rng(seed)
            graph = _trace_without_branches(traceable_choice, tg.tensor(_quarters(rng, shape, example_kind)))
            inputs = [(kind, tg.tensor(_quarters(rng, shape, kind))) for kind in KINDS]
            outputs = [(kind, x, run(graph, (x,))) for kind, x in inputs]
            swapped = all(np.allclose(to_numpy(got), to_numpy(x.tanh() if x.sum().item() <= 0 else x * 0.5),
                                      rtol=1e-5) for _, x, got in outputs)
            for kind, x, got in outputs:
                expect_close(got, eager_choice(x), rtol=1e-5, what=f"output of the traced graph on "
                             f"{x.numpy().ravel().tolist()} (sum {float(x.numpy().sum()):g})",
                             hint=_choice_hint(kind, swapped))
        return Test(f"traced on a {list(shape)} input whose values are all {example_kind}, then run "
                    "on inputs of every sign (a sum of exactly 0, mixed signs)", run_test)

    rng = np.random.default_rng()
    tests = [make("positive", (4,), 0), make("negative", (4,), 1),
             make(str(rng.choice(["positive", "negative"])), (2, 3), int(rng.integers(10**6)))]
    return check("11.1", tests, candidate=traceable_choice,
                 solved="one graph, right for every input: the choice is now data in the graph, "
                        "not Python control flow.")


# -- 11.2 which inputs does a trace get wrong? ----------------------------------------------

def _outputs_agree(traced_out: tg.Tensor, eager_out: tg.Tensor) -> bool:
    """Same shape and the same values, NaN where both have NaN (rounding allowed)."""
    a = np.asarray(to_numpy(traced_out), dtype=np.float64)
    b = np.asarray(to_numpy(eager_out), dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))


def _agreements(fn: Callable, examples: list[tg.Tensor]) -> list[bool]:
    """For each example: does the trace made on ``examples[0]`` give eager ``fn``'s output?"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracerWarning)
        traced = tg.jit.trace(fn, (examples[0],))
    return [_outputs_agree(traced(x), fn(x)) for x in examples]


def doubled_two_ways(x: tg.Tensor) -> tg.Tensor:
    """Two branches, two different graphs, the same values: a trace is right for every input."""
    if x.sum() > 0:
        return x * 2.0
    return x + x


def tanh_chain(x: tg.Tensor) -> tg.Tensor:
    """No branch at all."""
    return (x * 2.0).tanh() - x


def mean_if_positive(x: tg.Tensor) -> tg.Tensor:
    """A branch whose two sides give outputs of different shapes ([1] and the input's)."""
    if x.sum() > 0:
        return x.mean(dim=0, keepdim=True)
    return x


def _signed(rng: np.random.Generator, signs: list[float], size: int = 3) -> list[tg.Tensor]:
    return [tg.tensor((rng.uniform(0.5, 2.0, size=size) * s).astype(np.float32)) for s in signs]


DIFFERENT = "trace once, on examples[0], and compare traced(x) with fn(x) for every example"


def check_first_divergence(first_divergence: Callable) -> Feedback:
    """Exercise 11.2: ``first_divergence(fn, examples)``: trace ``fn`` on ``examples[0]``, run
    the traced function on every example, and return the index of the first one whose output
    differs from eager ``fn`` (``None`` if all agree).

    The expected index comes from the engine at check time. Traps: outputs with NaN in both
    (they agree), branches whose graphs differ but whose values agree (comparing graphs is not
    enough), an output whose shape changed but whose values broadcast equal (compare shapes).
    """

    def make(description: str, fn: Callable, examples: list[tg.Tensor], missed: str,
             false_alarm: str) -> Test:
        def run_test() -> None:
            agree = _agreements(fn, examples)
            expected = agree.index(False) if False in agree else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TracerWarning)  # the point is to find them
                got = first_divergence(fn, list(examples))
            expect_true(got is None or (isinstance(got, (int, np.integer)) and not isinstance(got, bool)),
                        f"returned {got!r}: expected an example's index (an int) or None",
                        hint="return i for the first example that differs, None if none does")
            if got == expected:
                return
            if got is not None and not 0 <= got < len(examples):
                raise Mismatch(f"there is no example {got}: there are {len(examples)}", expected, got,
                               "return the index i of examples[i] (counted from 0)")
            if got is not None and agree[got]:
                raise Mismatch(f"example {got} gives the same output traced and eager",
                               expected, got, false_alarm)
            if got is not None:
                raise Mismatch(f"example {got} differs, but example {expected} is the first that "
                               "does", expected, got,
                               "return at the first difference" if missed == DIFFERENT else missed)
            raise Mismatch(f"example {expected} gives a different output traced and eager",
                           expected, got, missed)
        return Test(description, run_test, "trace once: traced = tg.jit.trace(fn, (examples[0],))")

    rng = np.random.default_rng()
    first_negative = int(rng.integers(1, 5))
    signs = [1.0] * first_negative + [-1.0] + [float(s) for s in rng.choice([1.0, -1.0], size=2)]
    with_nan = _signed(rng, [1.0, -1.0, 1.0])
    nan_values = with_nan[1].numpy().copy()
    nan_values[[0, 2]] = [np.nan, np.inf]
    with_nan[1] = tg.tensor(nan_values)
    same_mean = float(rng.uniform(0.5, 2.0))
    fixed = [tg.ones(3), tg.ones(3) * 2, -tg.ones(3), tg.ones(3) * 0.5, -tg.ones(3) * 2]
    tests = [
        make("choose (the if on x.sum() of section 11.4) on the notebook's five examples", eager_choice,
             fixed, DIFFERENT, DIFFERENT),
        make(f"choose on {len(signs)} examples with signs {signs}", eager_choice,
             _signed(rng, signs), DIFFERENT, DIFFERENT),
        # the trace is made on examples[0]: one made on another example differs at once
        make("choose on examples with signs [-1, 1, 1]", eager_choice,
             _signed(rng, [-1.0, 1.0, 1.0]), DIFFERENT, DIFFERENT),
        make("a function with no branch, on examples with NaN and inf", tanh_chain, with_nan,
             DIFFERENT, "NaN in both outputs is agreement: compare with equal_nan=True"),
        make("two branches that give the same values (x * 2.0 and x + x)", doubled_two_ways,
             _signed(rng, [1.0, -1.0, 1.0, -1.0]), DIFFERENT,
             "the traced graph (Mul) and the eager one (Add) differ, but their outputs do not: "
             "compare outputs, not graphs"),
        # a trace checks its inputs' shapes, so the shape trap is in the output: traced on a
        # positive example it returns the mean, shape [1]; eager returns x for a negative one
        make("a branch whose outputs differ in shape, on a negative example whose values are "
             "all equal", mean_if_positive, _signed(rng, [1.0, 1.0])
             + [tg.full((3,), -same_mean)] + _signed(rng, [-1.0]),
             "the traced output has shape [1], the eager one [3], with equal values: compare "
             "shapes too (np.allclose broadcasts [1] against [3])", DIFFERENT),
    ]
    return check("11.2", tests, candidate=first_divergence,
                 solved="you can test a trace against eager execution and find the input where "
                        "the captured graph stops being the program.")
