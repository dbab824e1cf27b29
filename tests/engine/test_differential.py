"""teachgrad against recorded PyTorch 2.13, case by case, on every device.

The cases live in ``scripts/differential_ops.py`` and ``scripts/differential_nn.py``
(programs written against PyTorch's API, run here with ``teachgrad`` in its
place); ``scripts/record_torch_fixtures.py`` stored what torch answered in
``tests/fixtures/torch_differential.npz``. Each case must give the same dtype,
shape and values (float32 within rounding), the same gradients, or raise an
error of the same class. torch itself is never imported.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import get_cpu_backend, set_cpu_backend

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from differential_cases import Ctx, run_case  # noqa: E402
from differential_suite import all_cases  # noqa: E402

FIXTURE = np.load(ROOT / "tests" / "fixtures" / "torch_differential.npz")
INDEX = json.loads(str(FIXTURE["__index__"]))["cases"]
CASES = {case.name: case for case in all_cases()}


def test_fixture_covers_every_case():
    assert sorted(INDEX) == sorted(CASES), "re-record: python scripts/record_torch_fixtures.py"


PARAMS = [pytest.param(device, name, id=f"{device}:{name}")
          for name, case in CASES.items() for device in case.devices]


@pytest.fixture
def on_device(request):
    """Switch the cpu backend to numba for the "numba" runs, and back afterwards."""
    previous = get_cpu_backend()
    yield
    set_cpu_backend(previous)


def _with_recorded_inputs(case):
    inputs = tuple(FIXTURE[f"{case.name}/in{i}"] if isinstance(x, np.ndarray) else x
                   for i, x in enumerate(case.inputs))
    return dataclasses.replace(case, inputs=inputs)


def _same(what: str, got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PyTorch gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, PyTorch gives {want.shape}"
    if want.dtype.kind == "f":
        tol = 1e-5 if want.dtype == np.float64 else 2e-4
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("device, name", PARAMS)
def test_matches_pytorch(device, name, on_device):
    if device == "numba":
        set_cpu_backend("numba", wait=True)
    case = _with_recorded_inputs(CASES[name])
    expected = INDEX[name]
    result = run_case(Ctx(tg, "cuda" if device == "cuda" else "cpu"), case,
                      lambda t: t.detach().cpu().numpy())
    if "error" in expected:
        assert "error" in result, f"PyTorch raises {expected['error']} ({expected['message']}), " \
                                  f"teachgrad returned a result"
        assert result["error"] == expected["error"], (
            f"PyTorch raises {expected['error']} ({expected['message']}), teachgrad "
            f"{result['error']} ({result['message']})")
        return
    assert "error" not in result, f"teachgrad raised {result.get('error')}: {result.get('message')}"
    assert len(result["outputs"]) == expected["outputs"]
    for k, got in enumerate(result["outputs"]):
        _same(f"output {k}", got, FIXTURE[f"{name}/out{k}"])
    for i, has_grad in expected["grads"].items():
        got = result["grads"][int(i)]
        assert (got is not None) == has_grad, f"input {i}: gradient presence differs"
        if has_grad:
            _same(f"gradient of input {i}", got, FIXTURE[f"{name}/grad{i}"])
