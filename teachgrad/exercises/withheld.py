"""Library calls an exercise asks the learner to write: withheld while the checker runs.

An exercise that teaches how ``DistributedSampler`` shards a dataset is not
solved by calling ``DistributedSampler``. While the learner's code runs, the
checker replaces such a call by one that raises :class:`LibraryCallWithheld`
(a :class:`~teachgrad.exercises.core.Mismatch`, so the learner reads which call
and why), and puts the original back afterwards. The checker computes its own
expected answers before, with the real call.

A plain function is refused under every name it is reached by: the public one
(``tune.hyperband_schedule``), the module that defines it
(``teachgrad.tune.schedule.hyperband_schedule``) and a name imported before the
check (``from teachgrad.tune import hyperband_schedule as hb``). Its code is swapped
for a refusal while the block runs, not only the attribute.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Iterator

from .core import Mismatch


class LibraryCallWithheld(Mismatch):
    """The learner's code called the library function the exercise asks them to write."""


# the calls withheld right now, by the name their refusing code carries
_REFUSING: dict[str, str] = {}


def _refusal(spelt: str) -> LibraryCallWithheld:
    return LibraryCallWithheld(
        f"your code called {spelt}, the library's own answer to this exercise",
        hint="compute it yourself, with the steps the chapter describes: that is "
             "what the exercise is for", show_values=False)


def _refuse_by_code_name(*args: Any, **kwargs: Any) -> Any:
    # runs as the library function's own code (its globals are the library module's):
    # it reaches this module through sys.modules and finds its message by its code's name
    withheld_module = __import__("sys").modules["teachgrad.exercises.withheld"]
    name = __import__("sys")._getframe(0).f_code.co_name
    raise withheld_module._refusal(withheld_module._REFUSING[name])


def _swappable(function: Any) -> bool:
    """A plain Python function without a closure: its code can be swapped in place."""
    return isinstance(function, types.FunctionType) and not function.__code__.co_freevars


@contextlib.contextmanager
def withheld(*calls: tuple[Any, str, str]) -> Iterator[None]:
    """Within the block, each ``(owner, attribute, spelt)`` call raises instead of running.

    ``owner`` is a module or a class, ``attribute`` the name on it, ``spelt`` how the
    learner would write the call (``"tune.hyperband_schedule"``) for the message.
    """
    originals = [(owner, name, owner.__dict__[name] if isinstance(owner, type)
                  else getattr(owner, name)) for owner, name, _ in calls]
    codes: list[tuple[types.FunctionType, types.CodeType, str]] = []

    def refusing(spelt: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise _refusal(spelt)
        return refuse

    try:
        for (owner, name, spelt), (_, _, original) in zip(calls, originals):
            setattr(owner, name, refusing(spelt))
            if _swappable(original):
                code_name = f"_withheld_{id(original)}"
                _REFUSING[code_name] = spelt
                codes.append((original, original.__code__, code_name))
                original.__code__ = _refuse_by_code_name.__code__.replace(
                    co_name=code_name, co_qualname=code_name)
        yield
    finally:
        for function, code, code_name in codes:
            function.__code__ = code
            _REFUSING.pop(code_name, None)
        for owner, name, original in originals:
            setattr(owner, name, original)
