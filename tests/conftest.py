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
import subprocess
import sys
import textwrap
from pathlib import Path

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


#: The first lines of a script run as on a GPU machine: numba set up for a GPU, and
#: compiling for sm_90 with no device to ask (nothing may launch on one: there is none).
_AS_ON_A_GPU_MACHINE = """
import os
os.environ["TEACHGRAD_CUDA"] = "gpu"
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
import teachgrad as tg
from numba.cuda import dispatcher
from teachgrad.kernels import compile_check
assert not tg.cuda.is_simulated()
dispatcher.get_current_device = lambda: compile_check._TargetDevice((9, 0))
"""


@pytest.fixture
def run_as_on_a_gpu_machine():
    """Run a script in a fresh Python with numba set up for a GPU, as on a GPU machine:
    for what teachgrad does there before anything reaches the device (simulated runs,
    PTX compiles). Returns the finished process."""
    def run(script: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if k not in ("TEACHGRAD_CUDA", "NUMBA_ENABLE_CUDASIM")}
        return subprocess.run(
            [sys.executable, "-c", _AS_ON_A_GPU_MACHINE + textwrap.dedent(script)],
            cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
            timeout=300)
    return run
