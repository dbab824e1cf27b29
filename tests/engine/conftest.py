"""Fixtures the engine tests share."""
from __future__ import annotations

import pytest

from teachgrad.backends import get_cpu_backend, set_cpu_backend


@pytest.fixture(params=["cpu", "numba", "cuda"])
def device(request):
    """A device name; "numba" is the cpu device with the numba backend switched on (and off
    again afterwards). A module with a ``device`` fixture of its own uses that one instead."""
    previous = get_cpu_backend()
    if request.param == "numba":
        set_cpu_backend("numba", wait=True)
    yield "cuda" if request.param == "cuda" else "cpu"
    set_cpu_backend(previous)
