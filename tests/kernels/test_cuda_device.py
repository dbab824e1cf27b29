"""The cuda device as a learner meets it: tg.cuda, device choice, transfers, training."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("TEACHGRAD_CUDA", "NUMBA_ENABLE_CUDASIM")}
    full_env.update(env, PYTHONPATH=ROOT + os.pathsep + full_env.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=120)


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="asserts the simulator's facts: is_simulated, its name, its 2 devices, "
                           "'no CUDA driver found'")
def test_this_machine_runs_cuda_in_the_simulator():
    assert not tg.cuda.is_available()  # PyTorch's meaning: a real GPU
    assert tg.cuda.is_simulated()
    assert tg.cuda.get_device_name() == "CUDA simulator"
    assert tg.cuda.device_count() == 2  # (the simulator's default)
    assert tg.cuda.describe() == ("teachgrad cuda: numba CUDA simulator (no CUDA driver found; "
                                  "set TEACHGRAD_CUDA=gpu to require one)")
    tg.cuda.synchronize()


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="needs a machine without a CUDA driver: with a GPU, TEACHGRAD_CUDA=gpu "
                           "finds one and nothing fails")
def test_requiring_a_gpu_without_one_fails_clearly_at_first_use():
    result = run_python(
        "import teachgrad as tg\n"
        "print(tg.cuda.describe()); print(tg.cuda.is_available())\n"
        "tg.zeros(2, device='cuda')\n",
        TEACHGRAD_CUDA="gpu",
    )
    lines = result.stdout.splitlines()
    assert lines == ["teachgrad cuda: unavailable (TEACHGRAD_CUDA=gpu but no CUDA driver found)", "False"]
    assert ("cuda is not available: TEACHGRAD_CUDA=gpu but no CUDA driver found. Unset TEACHGRAD_CUDA "
            "(or set it to 'sim') to run cuda tensors in numba's CUDA simulator instead.") in result.stderr


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="needs a machine without a CUDA driver: with a GPU, numba imported "
                           "first agrees with teachgrad's choice and nothing is reported")
def test_numba_imported_first_is_reported_not_fatal():
    result = run_python(
        "import warnings; warnings.simplefilter('always')\n"
        "from numba import cuda\n"
        "import teachgrad as tg\n"
        "print(tg.cuda.describe())\n",
    )
    assert result.returncode == 0, result.stderr
    assert "numba was imported before teachgrad" in result.stderr
    assert "Fix: import teachgrad before numba, or set NUMBA_ENABLE_CUDASIM=1" in result.stderr
    assert result.stdout.strip() == (
        "teachgrad cuda: unavailable (numba.cuda was imported first without the simulator and there "
        "is no GPU; import teachgrad before numba, or set NUMBA_ENABLE_CUDASIM=1)")


def test_simulator_can_be_asked_for_explicitly():
    result = run_python("import teachgrad as tg; print(tg.cuda.describe())", TEACHGRAD_CUDA="sim")
    assert result.stdout.strip() == "teachgrad cuda: numba CUDA simulator (TEACHGRAD_CUDA=sim)"


def test_device_limits():
    limits = tg.cuda.get_device_limits()
    assert (limits.max_threads_per_block, limits.max_block_dims, limits.warp_size) == (1024, (1024, 1024, 64), 32)


def test_a_chain_of_ops_copies_nothing_until_the_result_is_read():
    a = tg.tensor(np.arange(12.0).reshape(3, 4), dtype=tg.float32)
    tg.cuda.reset_transfer_stats()
    x = a.to("cuda")
    assert tg.cuda.transfer_stats() == {"host_to_device": 1, "device_to_host": 0,
                                        "bytes_h2d": 48, "bytes_d2h": 0,
                                        "device_to_device": 0, "bytes_d2d": 0}
    y = ((x * 2 + 1).relu() @ x.T).sum(dim=1) / 300.0  # scalars go as kernel arguments
    y = y.exp().max()
    assert tg.cuda.transfer_stats()["host_to_device"] == 1
    assert tg.cuda.transfer_stats()["device_to_host"] == 0
    result = y.item()
    stats = tg.cuda.transfer_stats()
    assert (stats["host_to_device"], stats["device_to_host"]) == (1, 1)
    expected = np.exp(((np.maximum(a.numpy() * 2 + 1, 0) @ a.numpy().T).sum(axis=1) / 300.0)).max()
    np.testing.assert_allclose(result, expected, rtol=1e-5)


def test_matmul_kernel_can_be_switched():
    assert tg.cuda.get_matmul_kernel() == "register"
    try:
        tg.cuda.set_matmul_kernel("tiled")
        assert tg.cuda.get_matmul_kernel() == "tiled"
        x = tg.ones(3, 5, device="cuda")
        np.testing.assert_array_equal((x @ x.T).cpu().numpy(), np.full((3, 3), 5.0))
    finally:
        tg.cuda.set_matmul_kernel("register")
    with pytest.raises(ValueError, match="unknown matmul kernel 'fast': choose one of naive, tiled, register"):
        tg.cuda.set_matmul_kernel("fast")


def test_a_small_mlp_trains_on_cuda_like_on_cpu():
    x = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)

    def train(device):
        tg.manual_seed(0)
        model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 1)).to(device)
        optimizer = tg.optim.Adam(model.parameters(), lr=0.05)
        inputs, targets = tg.tensor(x).to(device), tg.tensor(y).to(device)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = tg.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu().numpy() for p in model.parameters()]

    cpu_losses, cpu_params = train("cpu")
    cuda_losses, cuda_params = train("cuda")
    np.testing.assert_allclose(cuda_losses, cpu_losses, rtol=1e-5)
    for on_cuda, on_cpu in zip(cuda_params, cpu_params):
        np.testing.assert_allclose(on_cuda, on_cpu, rtol=1e-5, atol=1e-6)
    assert cpu_losses[-1] < cpu_losses[0]


def test_cross_entropy_forward_and_backward_match_cpu():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 2, 2, 0], dtype=np.int64)
    grads = []
    for device in ("cpu", "cuda"):
        z = tg.tensor(logits, device=device, requires_grad=True)
        loss = tg.nn.functional.cross_entropy(z, tg.tensor(labels, device=device))
        loss.backward()
        grads.append((loss.item(), z.grad.cpu().numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5, atol=1e-7)


def test_the_simulated_device_warns_once_on_first_use_and_is_not_available():
    result = run_python(
        "import warnings; warnings.simplefilter('always')\n"
        "import teachgrad as tg\n"
        "print(tg.cuda.is_available())\n"
        "device = 'cuda' if tg.cuda.is_available() else 'cpu'\n"
        "print(device)\n"
        "x = tg.ones(2, device='cuda')\n"
        "y = tg.ones(2, device='cuda') + x\n"
        "print(y.cpu().tolist())\n",
        TEACHGRAD_CUDA="sim",
    )
    assert result.stdout.splitlines() == ["False", "cpu", "[2.0, 2.0]"]
    assert result.stderr.count("SimulatedDeviceWarning") == 1, result.stderr
    assert result.stderr.startswith("<string>:6: SimulatedDeviceWarning: teachgrad: 'cuda' "
                                    "tensors run in numba's CUDA simulator here, not on a GPU "
                                    "(TEACHGRAD_CUDA=sim)")
    assert "10,000 to 100,000 times slower" in result.stderr
    assert "not for training" in result.stderr
