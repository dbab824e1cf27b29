"""nn.DataParallel over the simulated cuda devices: the same outputs and gradients as the
plain module (checked against numpy), uneven splits as Tensor.chunk makes them, bad ids."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.nn.parallel.data_parallel import chunk_sizes


def _numpy_mlp(w1, b1, w2, b2, x):
    """Forward and the gradients of sum(out**2) for Linear-ReLU-Linear, in numpy."""
    h = x @ w1.T + b1
    r = np.maximum(h, 0)
    out = r @ w2.T + b2
    g_out = 2 * out
    g_w2, g_b2 = g_out.T @ r, g_out.sum(0)
    g_h = (g_out @ w2) * (h > 0)
    return out, [g_h.T @ x, g_h.sum(0), g_w2, g_b2]


@pytest.mark.parametrize("batch", [5, 2, 1, 4])
def test_outputs_and_gradients_match_numpy(batch):
    rng = np.random.default_rng(batch)
    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 2))
    weights = [p.detach().numpy().astype(np.float64) for p in model.parameters()]
    x = rng.standard_normal((batch, 3)).astype(np.float32)
    model.to("cuda:0")
    out = tg.nn.DataParallel(model)(tg.tensor(x))
    (out ** 2).sum().backward()
    want, grads = _numpy_mlp(*weights, x.astype(np.float64))
    assert out.device == tg.device("cuda:0") and tuple(out.shape) == (batch, 2)
    np.testing.assert_allclose(out.detach().cpu().numpy(), want, rtol=1e-5, atol=1e-5)
    for p, g in zip(model.parameters(), grads):
        assert p.grad.device == tg.device("cuda:0")
        np.testing.assert_allclose(p.grad.cpu().numpy(), g, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n, parts, sizes", [(7, 3, [3, 3, 1]), (6, 4, [2, 2, 2]),
                                             (2, 3, [1, 1]), (4, 2, [2, 2]), (0, 2, [0])])
def test_chunk_sizes_are_tensor_chunks(n, parts, sizes):
    assert chunk_sizes(n, parts) == sizes
    if n:
        assert [len(c) for c in tg.arange(n).chunk(parts)] == sizes


def test_each_replica_runs_on_its_device_and_output_device_and_dim_are_honoured():
    model = tg.nn.Linear(3, 2).to("cuda:0")
    dp = tg.nn.DataParallel(model, device_ids=["cuda:0", 1], output_device=1, dim=1)
    x = tg.randn(2, 5, 3).to("cuda:0")
    with tg.streams.recording() as rec:
        out = dp(x)
    assert out.device == tg.device("cuda:1") and tuple(out.shape) == (2, 5, 2)
    np.testing.assert_allclose(out.detach().cpu().numpy(), model(x).detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    forward_kernels = {op.device for op in rec.ops if op.kind == "kernel" and op.op}
    assert forward_kernels == {0, 1}


def test_bad_device_ids_are_refused():
    model = tg.nn.Linear(2, 2).to("cuda:0")
    with pytest.raises(RuntimeError, match="invalid DataParallel device_ids cuda:5"):
        tg.nn.DataParallel(model, device_ids=[0, 5])
    with pytest.raises(ValueError, match="name a device twice"):
        tg.nn.DataParallel(model, device_ids=[0, 0])
    with pytest.raises(ValueError, match="device_ids is empty"):
        tg.nn.DataParallel(model, device_ids=[])
    with pytest.raises(ValueError, match="must be cuda devices, got cpu"):
        tg.nn.DataParallel(model, device_ids=["cpu"])
    with pytest.raises(RuntimeError, match=r"on device cuda:1 \(device_ids\[0\]\) but found "
                       r"one of them \(weight\) on device: cuda:0"):
        tg.nn.DataParallel(model, device_ids=[1, 0])
