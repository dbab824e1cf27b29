"""Which trials of a rung go on: the promotion rule, a part a learner can replace.

At the end of every rung, successive halving (and so Hyperband and BOHB, which run
it in each bracket) keeps the best ``floor(n / eta)`` of the ``n`` trials the rung
ran, best first, never a failed one, and gives them ``eta`` times the budget. That
rule is the engine's part ``tune.promote``::

    promote(losses, eta) -> indices of the trials that go on

``losses`` has one float per trial of the rung, in the order they ran, NaN for a
trial that failed (crashed, timed out) and the loss it returned (inf, NaN) for one
that diverged. While a learner's ``promote`` is plugged
(``tg.exercises.plug("tune.promote", promote)``), every search of ``teachgrad.tune``
asks it at every rung; what it returns is checked before the search uses it.
"""
from __future__ import annotations

import math
import numbers

from ..autograd import parts


def engine_promote(losses: list[float], eta: int) -> list[int]:
    """The engine's rule: the best ``len(losses) // eta`` finite losses, best first;
    ties go to the earlier trial (a failed trial still used its budget, so it counts in n)."""
    finished = [i for i, loss in enumerate(losses) if math.isfinite(loss)]
    finished.sort(key=lambda i: (losses[i], i))
    return finished[: len(losses) // eta]


PROMOTE = parts.declare(
    "tune.promote",
    receives="(losses, eta): a list of floats, one per trial of the rung in the order they "
             "ran (NaN or inf for a failed one), and the int eta",
    returns="a list of distinct indices into losses, best first: as many as "
            "min(len(losses) // eta, the number of finite losses), never a failed trial",
    engine=engine_promote)


def kept_count(losses: list[float], eta: int) -> int:
    """How many trials a rung of these losses keeps."""
    return min(len(losses) // eta, sum(math.isfinite(loss) for loss in losses))


def promote(losses: list[float], eta: int) -> list[int]:
    """The indices of the rung's trials that go on, from the plugged rule (or the engine's).

    The rule gets a copy of ``losses`` (changing it cannot change the search) and
    what it returns is checked: ints, distinct, in range, no failed trial, exactly
    :func:`kept_count` of them."""
    if PROMOTE.fn is None:
        return engine_promote(losses, eta)
    got = PROMOTE.call(list(losses), eta)
    return _checked(got, losses, eta)


def _checked(got: object, losses: list[float], eta: int) -> list[int]:
    n, want = len(losses), kept_count(losses, eta)
    expected = (f"a list of {want} distinct indices from 0 to {n - 1} (the best "
                f"len(losses) // eta = {n} // {eta}, failed trials never)")
    if isinstance(got, (str, bytes, dict)) or not hasattr(got, "__iter__"):
        raise PROMOTE.reject(f"{got!r:.40} ({type(got).__name__}) for {n} losses and eta = {eta}",
                             expected)
    try:
        indices = list(got)  # (a generator of the learner's runs only now)
    except Exception as error:
        raise PROMOTE.reject(f"an iterable that raised {type(error).__name__}: {error}",
                             expected) from error
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise PROMOTE.reject(f"{i!r} ({type(i).__name__}) among the indices", expected)
    indices = [int(i) for i in indices]
    outside = [i for i in indices if not 0 <= i < n]
    if outside:
        raise PROMOTE.reject(f"the index {outside[0]} for {n} losses", expected)
    if len(set(indices)) != len(indices):
        twice = next(i for i in indices if indices.count(i) > 1)
        raise PROMOTE.reject(f"the index {twice} twice", expected)
    failed = [i for i in indices if not math.isfinite(losses[i])]
    if failed:
        raise PROMOTE.reject(f"the index {failed[0]}, a failed trial (loss {losses[failed[0]]})",
                             expected)
    if len(indices) != want:
        raise PROMOTE.reject(f"{len(indices)} indices for {n} losses and eta = {eta}", expected)
    return indices
