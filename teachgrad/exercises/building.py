"""What the checkers of build exercises share: property tests and the plugged workload.

A build exercise has the learner write one piece of the engine (sum-to-shape, the
topological order, a backward formula, an optimizer's step). Its checker

1. property-tests the piece against the engine's own on inputs drawn by hypothesis
   (:func:`property_test`: shapes, strides and graphs the notebook never shows, seeded
   afresh on every run, the failing input shrunk to a small one);
2. plugs the piece into the engine (:func:`plugged_workload`) and runs the chapter's real
   workload on it (backward, gradcheck, training), compared with the engine's own run;
3. checks through the engine that the piece actually ran (the part counts its calls);
4. says which mistake it recognised, in the :class:`~.core.Mismatch` it raises.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from .core import Mismatch, Test, unseen_rng
from .plugging import plugged


def _hypothesis() -> Any:
    try:
        import hypothesis
    except ImportError as error:  # pragma: no cover (the lab installs it)
        raise ImportError("the checkers of build exercises draw their inputs with hypothesis: "
                          "pip install 'teachgrad[lab]' (or pip install hypothesis)") from error
    return hypothesis


def property_test(description: str, strategy: Callable[[Any], Any],
                  run: Callable[[Any], None], *, examples: int = 40,
                  shrink: bool = True) -> Test:
    """A test that runs ``run(example)`` on ``examples`` inputs drawn by hypothesis.

    ``strategy`` receives the ``hypothesis.strategies`` module and returns the strategy
    (so this module imports hypothesis only when a checker runs). ``run`` raises
    :class:`Mismatch` (naming the input) when the learner's piece is wrong; hypothesis
    then shrinks the input and the smallest failing one is reported (``shrink=False``:
    the first failing one, for inputs as slow to run as a kernel in the simulator).
    """
    seed = int(unseen_rng().integers(2**32))

    def run_all() -> None:
        hypothesis = _hypothesis()
        settings = hypothesis.settings(
            max_examples=examples, deadline=None, database=None, print_blob=False,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[p for p in hypothesis.Phase if shrink or p != hypothesis.Phase.shrink])

        @settings
        @hypothesis.seed(seed)
        @hypothesis.given(strategy(hypothesis.strategies))
        def each(example: Any) -> None:
            run(example)

        from hypothesis import reporting
        with reporting.with_reporter(lambda _text: None):  # (the checker's message says it)
            each()

    return Test(f"{description} ({examples} random inputs, seed {seed})", run_all)


@contextlib.contextmanager
def plugged_workload(part: str, fn: Callable, what: str) -> Iterator[Any]:
    """Run the block with ``fn`` plugged into ``part``; afterwards, a :class:`Mismatch`
    unless the engine called ``fn`` at least once (the piece really was used)."""
    with plugged(part, fn) as plugged_part:
        yield plugged_part
    if plugged_part.calls == 0:
        raise Mismatch(f"the engine never called your function while {what}",
                       hint=f"it was plugged into {part}, which this workload needs: "
                            "plug your own function, not a copy of the engine's",
                       show_values=False)


@contextlib.contextmanager
def written_by_the_learner(part: str, what: str) -> Iterator[None]:
    """Run the block (a call of the learner's piece) and raise :class:`Mismatch` if the
    engine's own implementation of ``part`` ran inside it: the exercise is to write the
    piece, not to call the one the engine has. Observed through the interpreter's
    profiling hook (which functions were called), not by reading the learner's source."""
    import sys

    from ..autograd import parts
    from .plugging import _declare_all
    _declare_all()  # (the optimizers' parts are declared when tg.optim is imported)
    engines = {parts.get(part).engine.__code__}
    called: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code in engines:
            called.append(frame.f_code.co_name)

    outer = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(outer)
    if called:
        raise Mismatch(f"your {what} called the engine's own {called[0]}",
                       hint=f"write the piece yourself: {part} is what the engine runs, and "
                            "calling it is no answer", show_values=False)
