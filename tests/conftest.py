"""Shared test settings and fixtures (the browser ones live in tests/browser/conftest.py).

The tests are grouped as the package is: engine/ (tensor, autograd, ops, nn, optim, data,
serialization), kernels/ (kernels and backends), bench/, execution/ (streams, jit, onnx),
scale/ (tune, distributed, tensorboard), widgets/, lessons/ (exercises, wrong answers,
learner edition, book, README) and browser/. A helper module sits beside the tests that
import it (pytest puts a test file's folder on ``sys.path``), so every test file's name must
be unique across the folders; recorded PyTorch outputs, shared by several groups, are in
fixtures/.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import teachgrad as tg

# No per-example deadline: the CUDA simulator and a busy 2-core CI machine make run
# times vary by 10x. In CI (CI=true) examples are derandomized, so a failure there
# reproduces on a laptop with HYPOTHESIS_PROFILE=ci.
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("dev"), derandomize=True,
                          print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(autouse=True)
def _seed_teachgrad() -> None:
    """Every test starts from the same random state, so a failure reproduces."""
    tg.manual_seed(0)
