"""Sorting, gather/scatter, masked ops, matrix parts, scans and splitting: every
differentiable one against central differences in float64, on cpu (numpy and numba).
On cuda (the simulator is slow) the differential test checks every gradient against
PyTorch's; here it runs cumprod's zeros, the scans' doubling steps and the sort kernel.

Inputs are distinct values (no ties: where two values are equal, sort and topk have
no derivative), and cumprod's inputs include zeros, one or two in a row, where a
gradient computed by dividing by the input would fail.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import gradcheck
from teachgrad.backends import get_cpu_backend, set_cpu_backend

rng = np.random.default_rng(7)
DISTINCT = rng.permutation(24).reshape(2, 3, 4) / 7.0 - 1.5  # all different, no ties


@pytest.fixture(autouse=True)
def restore_cpu_backend():
    previous = get_cpu_backend()
    yield
    set_cpu_backend(previous)


def on(device: str) -> str:
    """The tensor device for a test's device name ("numba": cpu, with the numba backend on)."""
    if device == "numba":
        set_cpu_backend("numba", wait=True)
    return "cuda" if device == "cuda" else "cpu"


CPU_BACKENDS = pytest.mark.parametrize("backend", ["cpu", "numba"])
EVERY_DEVICE = pytest.mark.parametrize("backend", ["cpu", "numba", "cuda"])


def leaf(a, device) -> tg.Tensor:
    return tg.tensor(np.asarray(a, np.float64), device=device, requires_grad=True)


def index(values, device) -> tg.Tensor:
    return tg.tensor(values, dtype=tg.int64, device=device)


CASES = {
    "sort": lambda x, d: x.sort(dim=1).values,
    "sort_descending": lambda x, d: tg.sort(x, dim=-1, descending=True)[0],
    "topk": lambda x, d: x.topk(2, dim=2).values,
    "topk_smallest": lambda x, d: tg.topk(x, 1, dim=0, largest=False).values,
    "gather": lambda x, d: x.gather(2, index([[[3, 0, 0]], [[1, 1, 2]]], d)),
    "index_select": lambda x, d: x.index_select(1, index([2, 0, 2], d)),
    "masked_fill": lambda x, d: x.masked_fill(x > 0, -1.0),
    "masked_select": lambda x, d: x.masked_select(x < 0.3),
    "tril": lambda x, d: x.tril(1),
    "triu": lambda x, d: tg.triu(x, -1),
    "diagonal": lambda x, d: x.diagonal(offset=1, dim1=-1, dim2=1),
    "diag_of_matrix": lambda x, d: x[0].diag(-1),
    "diag_of_vector": lambda x, d: tg.diag(x[1, 1], 1),
    "trace": lambda x, d: x[1].trace(),
    "cumsum": lambda x, d: x.cumsum(2),
    "cumsum_dim0": lambda x, d: tg.cumsum(x, 0),
    "cumprod": lambda x, d: x.cumprod(-1),
    "split": lambda x, d: x.split([1, 3], dim=2)[1],
    "chunk": lambda x, d: x.chunk(2, dim=1)[1] * 3,
    "unbind": lambda x, d: x.unbind(1)[2],
    "range_index": lambda x, d: x[:, range(2, 0, -1)],
}


@CPU_BACKENDS
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name, backend):
    device = on(backend)
    x = leaf(DISTINCT, device)
    assert gradcheck(lambda a: CASES[name](a, device), (x,))


@CPU_BACKENDS
@pytest.mark.parametrize("name", ["scatter", "scatter_add", "index_add", "scatter_", "index_add_"])
def test_gradcheck_two_inputs(name, backend):
    device = on(backend)
    x, src = leaf(DISTINCT[0], device), leaf(DISTINCT[1, :, :2] * 2, device)
    at = index([[1, 3], [0, 0], [2, 1]], device)
    rows = index([2, 0], device)

    def run(a, s):
        if name == "scatter":
            return a.scatter(1, at[:, :1], s[:, :1])  # no repeats: one write per place
        if name == "scatter_add":
            return a.scatter_add(1, at, s)
        if name == "index_add":
            return tg.index_add(a, 1, rows, s, alpha=0.5)
        y = a * 1  # in place on a tensor inside the graph
        if name == "scatter_":
            return y.scatter_(1, at[:, 1:], s[:, 1:])
        return y.index_add_(1, rows, s)
    assert gradcheck(run, (x, src))


@CPU_BACKENDS
def test_masked_fill_value_tensor_gradcheck(backend):
    device = on(backend)
    x, value = leaf(DISTINCT[0], device), leaf(np.array(0.25), device)
    assert gradcheck(lambda a, v: a.masked_fill(a > 0, v), (x, value))


@CPU_BACKENDS
@pytest.mark.parametrize("zeros", [[1], [0, 3], [2, 3], [0, 1, 2, 3]])
def test_cumprod_gradient_with_zeros_in_the_input(zeros, backend):
    check_cumprod_with_zeros(zeros, on(backend))


def test_cumprod_gradient_with_zeros_on_cuda():
    check_cumprod_with_zeros([0, 2, 3], "cuda")


def check_cumprod_with_zeros(zeros, device):
    values = np.array([[1.5, -0.5, 2.0, 0.75], [0.5, 3.0, -1.25, 2.0]])
    values[:, zeros] = 0.0
    x = leaf(values, device)
    assert gradcheck(lambda a: a.cumprod(1), (x,))
    assert gradcheck(lambda a: a.cumprod(0), (x,))


@EVERY_DEVICE
def test_cumsum_and_cumprod_match_numpy_over_many_doubling_steps(backend):
    device = on(backend)
    x = rng.uniform(0.5, 1.5, size=(3, 70))
    t = tg.tensor(x, device=device)
    np.testing.assert_allclose(t.cumsum(1).cpu().numpy(), np.cumsum(x, 1), rtol=1e-12)
    np.testing.assert_allclose(t.cumprod(1).cpu().numpy(), np.cumprod(x, 1), rtol=1e-12)
    ints = rng.integers(-5, 5, size=(4, 33))
    np.testing.assert_array_equal(tg.tensor(ints, device=device).cumsum(1).cpu().numpy(),
                                  np.cumsum(ints, 1))


@EVERY_DEVICE
def test_sort_matches_a_stable_numpy_sort(backend):
    device = on(backend)
    x = rng.integers(0, 6, size=(5, 40)).astype(np.float32)  # many ties
    x[1, 3] = x[2, 7] = np.nan
    t = tg.tensor(x, device=device)
    for axis in (0, 1):
        for descending in (False, True):
            values, order = t.sort(dim=axis, descending=descending)
            key = -x if descending else x
            key = np.where(np.isnan(x), -np.inf if descending else np.inf, key)
            want = np.argsort(key, axis=axis, kind="stable")
            np.testing.assert_array_equal(order.cpu().numpy(), want)
            np.testing.assert_array_equal(values.cpu().numpy(), np.take_along_axis(x, want, axis))
