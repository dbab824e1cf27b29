"""Library calls an exercise asks the learner to write: withheld while the checker runs.

An exercise that teaches how ``DistributedSampler`` shards a dataset is not
solved by calling ``DistributedSampler``. While the learner's code runs, the
checker replaces such a call by one that raises :class:`LibraryCallWithheld`
(a :class:`~teachgrad.exercises.core.Mismatch`, so the learner reads which call
and why), and puts the original back afterwards. The checker computes its own
expected answers before, with the real call.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .core import Mismatch


class LibraryCallWithheld(Mismatch):
    """The learner's code called the library function the exercise asks them to write."""


@contextlib.contextmanager
def withheld(*calls: tuple[Any, str, str]) -> Iterator[None]:
    """Within the block, each ``(owner, attribute, spelt)`` call raises instead of running.

    ``owner`` is a module or a class, ``attribute`` the name on it, ``spelt`` how the
    learner would write the call (``"tune.hyperband_schedule"``) for the message.
    """
    originals = [(owner, name, owner.__dict__[name] if isinstance(owner, type)
                  else getattr(owner, name)) for owner, name, _ in calls]

    def refusing(spelt: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise LibraryCallWithheld(
                f"your code called {spelt}, the library's own answer to this exercise",
                hint="compute it yourself, with the steps the chapter describes: that is "
                     "what the exercise is for", show_values=False)
        return refuse

    try:
        for owner, name, spelt in calls:
            setattr(owner, name, refusing(spelt))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
