"""Asynchronous dispatch on the cuda device: same results as blocking launches, in order,
with the host really running ahead (in the simulator, a worker thread plays the device)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import threading
import time

import numpy as np
import pytest
from numba import cuda

from teachgrad import streams
from teachgrad.kernels.launch import launch
from teachgrad.kernels.transfer import to_device, to_host

GATE = threading.Event()  # the gated kernel waits for it: a device slowed on purpose
# gated_fill calls GATE.wait, a host Python object: only the simulator (which runs kernels as
# Python) can run it; numba cannot compile it for a GPU
gated = pytest.mark.skipif(not tg.cuda.is_simulated(),
                           reason="gated_fill waits on a host threading.Event: only the "
                                  "simulator runs it, numba cannot compile it for a GPU")


@cuda.jit
def gated_fill(x, value):
    """Fill ``x`` with ``value`` once GATE opens (the simulator runs this as Python)."""
    if cuda.threadIdx.x == 0:
        GATE.wait(20.0)
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.size:
        x[i] = value


def _program(seed: int, device: str) -> dict[str, np.ndarray]:
    """A random mix of cuda ops: elementwise, matmul, reductions, indexing, in place, backward."""
    rng = np.random.default_rng(seed)
    a = tg.tensor(rng.standard_normal((5, 4)), device=device, requires_grad=True)
    w = tg.tensor(rng.standard_normal((4, 3)), device=device, requires_grad=True)
    h = a @ w
    steps = rng.choice(["tanh", "relu", "mul", "add_", "index", "slice_set", "exp", "sub"], size=8)
    for step in steps:
        if step == "tanh":
            h = h.tanh()
        elif step == "relu":
            h = h.relu() + 0.1
        elif step == "mul":
            h = h * tg.tensor(rng.standard_normal((1, 3)), device=device)
        elif step == "add_":
            shift = tg.zeros((1, 3), device=device, dtype=h.dtype)  # outside the graph
            shift.add_(float(rng.standard_normal()))
            shift.mul_(2.0)
            h = h + shift
        elif step == "index":
            rows = rng.integers(0, h.shape[0], size=h.shape[0])
            h = h[tg.tensor(rows, device=device)]
        elif step == "slice_set":
            mask = tg.ones(tuple(h.shape), device=device, dtype=h.dtype)
            mask[1:3] = h.detach()[1:3] * 0.5  # a scatter into a tensor outside the graph
            h = h * mask
        elif step == "exp":
            h = (h * 0.1).exp()
        else:
            h = h - h.sum(dim=0, keepdim=True) / 5
    loss = (h * h).sum()
    loss.backward()
    grad_w = w.grad.cpu().numpy()
    with tg.no_grad():  # an SGD step: in place on a leaf, queued behind backward
        w -= 0.01 * w.grad
    after = (a @ w).sum()
    return {"loss": np.array(loss.item()), "h": h.detach().cpu().numpy(),
            "grad_a": a.grad.cpu().numpy(), "grad_w": grad_w, "w": w.detach().cpu().numpy(),
            "after": np.array(after.item())}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_program_gives_the_same_bits_async_and_blocking(seed):
    assert not streams.launch_blocking()
    if tg.cuda.is_simulated():  # (gated_fill runs only in the simulator: see `gated`)
        GATE.clear()  # hold the device back, so the program is enqueued well ahead of it
        launch(gated_fill, 1, 1, to_device(np.zeros(1)), 0.0)
        threading.Timer(0.3, GATE.set).start()
    asynchronous = _program(seed, "cuda")
    with streams.blocking_launches():
        blocking = _program(seed, "cuda")
    reference = _program(seed, "cpu")
    for name in asynchronous:
        if tg.cuda.is_simulated():  # one simulated thread at a time: the same bits
            np.testing.assert_array_equal(asynchronous[name], blocking[name], err_msg=name)
        else:  # the index step's backward adds repeated rows with atomics, in any order
            np.testing.assert_allclose(asynchronous[name], blocking[name], rtol=1e-13,
                                       atol=1e-13, err_msg=name)
        np.testing.assert_allclose(asynchronous[name], reference[name], rtol=1e-10, atol=1e-10,
                                   err_msg=name)


@gated
def test_the_host_returns_before_the_device_has_run_the_kernel():
    GATE.clear()
    x = to_device(np.zeros(40, np.float32))
    with streams.recording() as rec:
        launch(gated_fill, 2, 32, x, 7.0)  # returns at once: the kernel waits for GATE
        assert not streams.current_stream().query()
        kernel = rec.ops[-1]
        assert kernel.name == "gated_fill" and kernel.status in ("queued", "running")
        assert kernel.finished is None
        GATE.set()
        np.testing.assert_array_equal(to_host(x), np.full(40, 7.0, np.float32))  # waits
    assert kernel.status == "done" and kernel.enqueued <= kernel.started <= kernel.finished


@gated
def test_item_waits_for_the_kernels_before_it_and_the_wait_is_recorded():
    GATE.clear()
    x = tg.zeros(8, device="cuda")
    with streams.recording() as rec:
        launch(gated_fill, 1, 8, x._array.buffer, 2.0)
        total = x.sum()  # queued behind the gated kernel: must read 2.0 * 8, never 0
        threading.Timer(0.2, GATE.set).start()
        assert total.item() == 16.0
    wait = rec.waits[0]
    assert wait.reason == "Tensor.item" and wait.site.startswith("test_async_dispatch.py:")
    assert wait.ended - wait.began >= 0.15  # the host really waited for the gated kernel
    assert [op.op for op in rec.ops if op.kind == "kernel"][-1] == "Sum.forward"


@gated
def test_launch_blocking_runs_each_kernel_before_returning():
    x = to_device(np.zeros(8, np.float32))
    GATE.set()
    with streams.blocking_launches(), streams.recording(wait_at_end=False) as rec:
        assert streams.launch_blocking()
        launch(gated_fill, 1, 8, x, 3.0)
        assert rec.ops[-1].status == "done"  # already ran, before launch returned
    assert not streams.launch_blocking()


def test_set_launch_blocking_takes_a_bool():
    with pytest.raises(TypeError) as error:
        streams.set_launch_blocking("yes")
    assert str(error.value) == "set_launch_blocking takes True or False, got 'yes'"


def test_cpu_ops_stay_synchronous():
    with streams.recording() as rec:
        (tg.ones(3) * 2).sum().item()
    assert rec.ops == [] and all(w.reason == "end of recording" for w in rec.waits)


@gated
def test_the_host_can_use_numba_cuda_while_a_kernel_of_the_same_module_runs():
    """While a simulated kernel runs, `cuda` in its module must stay numba.cuda for the host."""
    GATE.clear()
    x = to_device(np.zeros(8))
    launch(gated_fill, 1, 8, x, 4.0)  # running on the worker, inside this module's globals
    time.sleep(0.05)

    @cuda.jit  # the host, meanwhile, defines and launches another kernel of this module
    def add_one(y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] += 1.0

    assert hasattr(cuda, "jit") and "numba.cuda" in repr(cuda)
    launch(add_one, 1, 8, x)  # queued behind the gated kernel: runs after it
    GATE.set()
    np.testing.assert_array_equal(to_host(x), np.full(8, 5.0))


@gated
def test_a_kernel_called_directly_waits_for_the_queue_and_does_not_deadlock():
    """A direct ``kernel[grid, block](host arrays)`` (as the race checker makes) runs after
    the queued work, as on a GPU's default stream, and its copies back do not wait for it."""
    GATE.clear()
    x = to_device(np.zeros(8))
    launch(gated_fill, 1, 8, x, 2.0)  # queued, held at the gate
    threading.Timer(0.2, GATE.set).start()
    host = np.zeros(4)
    gated_fill[1, 4](host, 9.0)  # waits for the queue, then runs; writes back to host
    np.testing.assert_array_equal(host, np.full(4, 9.0))
    assert tg.cuda.current_stream().query()  # the queued kernel ran first
    np.testing.assert_array_equal(to_host(x), np.full(8, 2.0))
