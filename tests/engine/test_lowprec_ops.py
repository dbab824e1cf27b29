"""Operations on float16 and bfloat16 tensors, against PyTorch's CPU results.

teachgrad computes a 16-bit operation in float32 and rounds its result once (see
``backends/low_precision.py``), and a 16-bit backward in float32 with each gradient
rounded once, as PyTorch's CPU kernels do. The recorded outputs and gradients
(``scripts/record_lowprec.py``) are matched bit for bit, except where noted in
``TOLERANT`` with the reason (and up to the sign of a zero).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import teachgrad as tg
import teachgrad.nn.functional as F
from lowprec_fixture import from_bits, load

TARGET = [0, 3, 1, 2, 3, 0]
OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "matmul": lambda a, b: a @ b,
    "sum": lambda a: a.sum(dim=1),
    "sum_all": lambda a: a.sum(),
    "mean": lambda a: a.mean(dim=1),
    "softmax": lambda a: F.softmax(a, dim=1),
    "exp": lambda a: a.exp(),
    "relu": lambda a: F.relu(a),
    "linear": lambda x, w, b: F.linear(x, w, b),
    "layer_norm": lambda x, w, b: F.layer_norm(x, (8,), w, b),
    "cross_entropy": lambda a: F.cross_entropy(a, tg.tensor(TARGET)),
}
#: (dtype/op, "out" or "grad") -> the largest difference allowed, as a multiple of the
#: dtype's epsilon times the largest recorded magnitude. PyTorch's fused kernels for
#: these round an intermediate (the float16 log-softmax inside nll_loss's mean, the
#: per-row sums inside layer_norm's backward) where teachgrad keeps float32, so the two
#: land one rounding apart; everything else is bit for bit.
TOLERANT = {("float16/cross_entropy", "out"): 1, ("float16/cross_entropy", "grad"): 2,
            ("bfloat16/cross_entropy", "grad"): 2, ("float16/layer_norm", "grad"): 2,
            ("bfloat16/layer_norm", "grad"): 2}
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _cases():
    _, index = load()
    return sorted(index["ops"])


def _run(key):
    arrays, index = load()
    dtype_name, name = key.split("/")
    dtype = getattr(tg, dtype_name)
    inputs = [tg.tensor(arrays[f"ops/{key}/in{i}"]).to(dtype).requires_grad_()
              for i in range(index["ops"][key]["inputs"])]
    out = OPS[name](*inputs)
    out.backward(tg.tensor(arrays[f"ops/{key}/grad_out"]).to(dtype))
    return arrays, dtype_name, inputs, out


def _same(got, want_bits, dtype_name, allowed):
    want = from_bits(want_bits, dtype_name)
    assert got.dtype == want.dtype
    if not allowed:  # every value exactly (relu's backward gives -0.0 where PyTorch has +0.0)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        bound = allowed * EPS[dtype_name] * np.max(np.abs(w))
        assert np.max(np.abs(g - w)) <= bound


@pytest.mark.parametrize("key", _cases())
def test_output_matches_pytorch(key):
    arrays, dtype_name, _, out = _run(key)
    assert out.dtype.name == dtype_name
    _same(out.detach().numpy(), arrays[f"ops/{key}/out"], dtype_name,
          TOLERANT.get((key, "out")))


@pytest.mark.parametrize("key", _cases())
def test_gradients_match_pytorch_in_the_inputs_dtype(key):
    arrays, dtype_name, inputs, _ = _run(key)
    for i, t in enumerate(inputs):
        assert t.grad.dtype is t.dtype
        _same(t.grad.numpy(), arrays[f"ops/{key}/grad{i}"], dtype_name,
              TOLERANT.get((key, "grad")))


def test_one_rounding_per_operation_not_per_primitive():
    # linear's product and bias are added in float32 before the one rounding: rounding
    # the product first would lose the bias's low bits here
    x = tg.tensor([[1.0, 1.0]], dtype=tg.bfloat16)
    w = tg.tensor([[1.0, 2.0 ** -8]], dtype=tg.bfloat16)
    b = tg.tensor([2.0 ** -8], dtype=tg.bfloat16)
    once = np.float32(1.0 + 2.0 ** -8 + 2.0 ** -8).astype(ml_dtypes.bfloat16)
    assert F.linear(x, w, b).numpy()[0, 0] == once == ml_dtypes.bfloat16(1.0078125)


def test_a_sum_accumulates_in_float32():
    # 4096 ones: a float16 running sum would stop at 2048 (2048 + 1 rounds back to 2048)
    assert tg.ones(4096, dtype=tg.float16).sum().item() == 4096.0


def test_in_place_arithmetic_rounds_into_the_16_bit_storage():
    x = tg.tensor([1.0, 2.0], dtype=tg.float16)
    x += tg.tensor([2.0 ** -11, 0.5], dtype=tg.float16)
    assert x.dtype is tg.float16
    assert x.tolist() == [1.0, 2.5]  # 1 + 2^-11 is a tie: rounds to even, back to 1


def test_views_of_a_16_bit_tensor_stay_views():
    x = tg.zeros(2, 3, dtype=tg.bfloat16)
    row = x[0]
    row += 1.0
    assert x.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    assert x.reshape(6).dtype is tg.bfloat16


def test_float64_gradcheck_is_unchanged_beside_16_bit_work():
    tg.ones(2, dtype=tg.float16).sum()  # (16-bit work first: nothing of it may leak)
    x = tg.randn(3, 4, dtype=tg.float64, requires_grad=True)
    w = tg.randn(2, 4, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: F.softmax(F.linear(a, b), dim=1), (x, w))


def test_float16_on_cuda_matches_cpu():
    a = tg.randn(5, 7).half()
    b = tg.randn(7, 3).half()
    on_cuda = (a.cuda() @ b.cuda() + a.cuda()[:, :3]).cpu()
    assert on_cuda.dtype is tg.float16
    np.testing.assert_array_equal(on_cuda.numpy(), (a @ b + a[:, :3]).numpy())


def test_bfloat16_on_cuda_is_refused_with_the_fix():
    with pytest.raises(TypeError, match="numba has no bfloat16 type. Fix: use tg.float16"):
        tg.ones(2, dtype=tg.bfloat16).cuda()
    with pytest.raises(TypeError, match="does not support bfloat16"):
        tg.zeros(2, device="cuda", dtype=tg.bfloat16)
