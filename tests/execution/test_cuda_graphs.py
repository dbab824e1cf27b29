"""CUDA graphs: capture a step once, replay its launches (torch.cuda.CUDAGraph's API)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import numpy as np
import pytest

from teachgrad import streams
from teachgrad.autograd import function as function_module
from teachgrad.backends.cuda_backend import CudaBackend
from teachgrad.streams import stream as stream_state  # noqa: F401  (the module, for state)
from teachgrad.streams.stream import capturing

RNG = np.random.default_rng(7)


def mlp(seed: int = 0) -> tg.nn.Module:
    tg.manual_seed(seed)
    return tg.nn.Sequential(tg.nn.Linear(3, 5), tg.nn.ReLU(), tg.nn.Linear(5, 2)).to("cuda")


def numpy_forward(model: tg.nn.Module, x: np.ndarray) -> np.ndarray:
    w1, b1, w2, b2 = (p.detach().cpu().numpy() for p in model.parameters())
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def warm_up(step, times: int = 2) -> None:
    """PyTorch's recipe: a few iterations on a side stream before capturing."""
    side = tg.cuda.Stream()
    side.wait_stream(tg.cuda.current_stream())
    with tg.cuda.stream(side):
        for _ in range(times):
            step()
    tg.cuda.current_stream().wait_stream(side)


def batch(rows: int = 4) -> tuple[np.ndarray, np.ndarray]:
    return (RNG.normal(size=(rows, 3)).astype(np.float32),
            RNG.normal(size=(rows, 2)).astype(np.float32))


def captured_forward():
    model = mlp()
    static_x = tg.zeros(4, 3, device="cuda")
    with tg.no_grad():
        warm_up(lambda: model(static_x))
        g = tg.cuda.CUDAGraph()
        with tg.cuda.graph(g):
            static_out = model(static_x)
    return model, g, static_x, static_out


def test_replay_computes_the_forward_on_new_data_in_the_static_input():
    model, g, static_x, static_out = captured_forward()
    buffer = static_out._array.buffer
    for _ in range(3):  # N replays, each on a new batch copied into the static input
        x, _ = batch()
        static_x.copy_(tg.tensor(x, device="cuda"))
        g.replay()
        np.testing.assert_allclose(static_out.cpu().numpy(), numpy_forward(model, x),
                                   rtol=1e-5, atol=1e-6)
    assert static_out._array.buffer is buffer  # replays write the same output buffer
    assert g.replays == 3
    assert g.backend == "simulator" if tg.cuda.is_simulated() else g.backend in (
        "cuda.core graph", "recorded launches")


def test_capture_records_without_running():
    model = mlp()
    static_x = tg.zeros(4, 3, device="cuda")
    g = tg.cuda.CUDAGraph()
    with tg.no_grad(), streams.recording() as rec:
        with tg.cuda.graph(g):
            model(static_x)
    captured = [op for op in rec.ops if op.status == "captured"]
    assert len(captured) == len(g.launches) > 0
    assert all(op.started is None for op in captured)  # nothing ran during the capture


def train_step(model, opt, x, y):
    loss = tg.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_a_replayed_training_step_matches_eager_training():
    eager, graphed = mlp(), mlp()
    eager_opt = tg.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    graphed_opt = tg.optim.SGD(graphed.parameters(), lr=0.1, momentum=0.9)
    static_x, static_y = tg.zeros(4, 3, device="cuda"), tg.zeros(4, 2, device="cuda")

    def both_step(x, y):
        eager_opt.zero_grad(set_to_none=True)
        train_step(eager, eager_opt, tg.tensor(x, device="cuda"), tg.tensor(y, device="cuda"))
        graphed_opt.zero_grad(set_to_none=True)
        train_step(graphed, graphed_opt, tg.tensor(x, device="cuda"), tg.tensor(y, device="cuda"))

    for _ in range(2):  # the warm-up: the same steps for both models
        both_step(*batch())
    graphed_opt.zero_grad(set_to_none=True)
    g = tg.cuda.CUDAGraph()
    with tg.cuda.graph(g):
        static_loss = train_step(graphed, graphed_opt, static_x, static_y)
    for _ in range(3):
        x, y = batch()
        eager_opt.zero_grad(set_to_none=True)
        expected_loss = np.mean((numpy_forward(eager, x) - y) ** 2)
        loss = train_step(eager, eager_opt, tg.tensor(x, device="cuda"), tg.tensor(y, device="cuda"))
        static_x.copy_(tg.tensor(x, device="cuda"))
        static_y.copy_(tg.tensor(y, device="cuda"))
        g.replay()
        assert static_loss.item() == pytest.approx(expected_loss, rel=1e-5)
        assert static_loss.item() == pytest.approx(loss.item(), rel=1e-6)
        for p, q in zip(eager.parameters(), graphed.parameters()):
            np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().cpu().numpy(),
                                       rtol=1e-5, atol=1e-6)


def test_the_graph_holds_as_many_launches_as_an_eager_step():
    model = mlp()
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x, y = tg.zeros(4, 3, device="cuda"), tg.zeros(4, 2, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        train_step(model, opt, x, y)

    warm_up(step)
    with streams.recording() as eager:
        step()
    g = tg.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with tg.cuda.graph(g):
        train_step(model, opt, x, y)
    eager_kernels = [op.name for op in eager.ops if op.kind == "kernel"]
    assert [c.name for c in g.launches if c.kind == "kernel"] == eager_kernels
    kernel, grid, block, args = g.launches[0].kernel_launch
    assert hasattr(kernel, "py_func") and isinstance(args, tuple)


def test_replay_runs_no_op_dispatch_and_marks_its_launches(monkeypatch):
    model, g, static_x, static_out = captured_forward()
    applied, backend_calls = [], []
    monkeypatch.setattr(function_module, "observer",
                        lambda cls, args, kwargs: applied.append(cls) or cls._apply(*args, **kwargs))
    for name in ("binary", "unary", "matmul", "reduce", "where"):
        original = getattr(CudaBackend, name)
        monkeypatch.setattr(CudaBackend, name, lambda self, *a, _o=original, _n=name, **k:
                            backend_calls.append(_n) or _o(self, *a, **k))
    with streams.recording() as rec:
        g.replay()
    assert applied == [] and backend_calls == []  # no Function.apply, no backend primitive
    if not tg.cuda.is_simulated():
        return  # (a GPU graph runs its kernels inside the driver: no record each)
    replayed = [op for op in rec.ops if op.replay is not None and op.kind != "graph"]
    assert [op.name for op in replayed] == [c.name for c in g.launches]
    assert all(op.status == "done" and op.replay == f"graph {g.id}, replay 1" for op in replayed)
    with tg.no_grad():  # the same observer sees an eager forward: it would have noticed
        model(static_x)
    assert applied


@pytest.mark.skipif(not tg.cuda.is_simulated(), reason="the simulator records each replayed launch")
def test_replay_of_a_graph_counts_device_time_once():
    _, g, _, _ = captured_forward()
    with streams.recording() as rec:
        g.replay()
    kernels = sum(op.finished - op.started for op in rec.ops if op.kind == "kernel")
    assert rec.device_busy_seconds() == pytest.approx(kernels)


HOST_WAITS = {
    "item": lambda out: out.sum().item(),
    "tolist": lambda out: out.tolist(),
    "cpu": lambda out: out.cpu(),
    "print": lambda out: repr(out),
    "tg.cuda.synchronize": lambda out: tg.cuda.synchronize(),
    "stream.synchronize": lambda out: tg.cuda.current_stream().synchronize(),
    "event.synchronize": lambda out: tg.cuda.current_stream().record_event().synchronize(),
}


@pytest.mark.parametrize("what", list(HOST_WAITS))
def test_a_host_wait_during_capture_is_refused_and_abandons_it(what):
    model = mlp()
    static_x = tg.zeros(4, 3, device="cuda")
    g = tg.cuda.CUDAGraph()
    with pytest.raises(tg.cuda.GraphCaptureError, match="host wait.*g.replay"):
        with tg.no_grad(), tg.cuda.graph(g):
            HOST_WAITS[what](model(static_x))
    assert capturing == [] and tg.cuda.current_stream() is tg.cuda.default_stream()
    with pytest.raises(RuntimeError, match="holds no captured graph"):
        g.replay()
    with tg.no_grad(), tg.cuda.graph(g):  # the same graph may capture again
        model(static_x)
    assert len(g.launches) > 0


def test_a_copy_from_host_memory_during_capture_is_refused():
    g = tg.cuda.CUDAGraph()
    with pytest.raises(tg.cuda.GraphCaptureError, match="copies host memory.*before the capture"):
        with tg.cuda.graph(g):
            tg.tensor([1.0, 2.0], device="cuda")
    assert capturing == [] and not g.launches


def test_dropout_draws_on_the_host_and_is_refused():
    x = tg.ones(4, 3, device="cuda")
    with pytest.raises(tg.cuda.GraphCaptureError, match="model.eval"):
        with tg.cuda.graph(tg.cuda.CUDAGraph()):
            tg.nn.functional.dropout(x, 0.5, training=True)


def test_accumulating_into_an_existing_grad_is_refused():
    model = mlp()
    x = tg.zeros(4, 3, device="cuda")
    model(x).sum().backward()  # .grad exists: the captured backward would rebind it
    with pytest.raises(tg.cuda.GraphCaptureError, match="zero_grad\\(set_to_none=True\\)"):
        with tg.cuda.graph(tg.cuda.CUDAGraph()):
            model(x).sum().backward()
    assert capturing == []


def test_adam_keeps_its_step_on_the_host_and_is_refused():
    model = mlp()
    opt = tg.optim.Adam(model.parameters(), lr=0.01)
    x, y = tg.zeros(4, 3, device="cuda"), tg.zeros(4, 2, device="cuda")
    warm_up(lambda: (opt.zero_grad(set_to_none=True), train_step(model, opt, x, y)))
    before = [p.detach().cpu().numpy() for p in model.parameters()]
    steps = [opt.state[p]["step"] for p in model.parameters()]
    opt.zero_grad(set_to_none=True)
    with pytest.raises(tg.cuda.GraphCaptureError, match="Adam.step.*capturable"):
        with tg.cuda.graph(tg.cuda.CUDAGraph()):
            train_step(model, opt, x, y)
    assert [opt.state[p]["step"] for p in model.parameters()] == steps
    for p, old in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), old)


def test_capture_on_the_default_stream_is_refused():
    g = tg.cuda.CUDAGraph()
    with pytest.raises(tg.cuda.GraphCaptureError, match="default stream.*side stream"):
        with tg.cuda.graph(g, stream=tg.cuda.default_stream()):
            pass
    with pytest.raises(tg.cuda.GraphCaptureError, match="default stream"):
        g.capture_begin()
    assert capturing == [] and g.backend is None


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(pool="mine"), TypeError, "graph_pool_handle"),
    (dict(stream=0), TypeError, "tg.cuda.Stream or None"),
    (dict(capture_error_mode="strict"), ValueError, "global, thread_local, relaxed"),
])
def test_bad_arguments_are_refused_before_anything_changes(kwargs, error, message):
    g = tg.cuda.CUDAGraph()
    with pytest.raises(error, match=message):
        with tg.cuda.graph(g, **kwargs):
            raise AssertionError("the block must not run")
    assert capturing == [] and tg.cuda.current_stream() is tg.cuda.default_stream()
    assert g.backend is None and not g.launches
    with pytest.raises(TypeError, match="takes a tg.cuda.CUDAGraph"):
        with tg.cuda.graph("g"):
            pass
    with pytest.raises(TypeError, match="keep_graph"):
        tg.cuda.CUDAGraph(keep_graph="yes")


def test_a_graph_captures_once_until_reset_and_shares_a_pool():
    _, g, static_x, _ = captured_forward()
    with pytest.raises(RuntimeError, match="already owns a captured graph"):
        with tg.cuda.graph(g):
            pass
    pool = g.pool()
    g.reset()
    assert not g.launches and g.backend is None
    g2 = tg.cuda.CUDAGraph()
    with tg.cuda.graph(g2, pool=pool):
        static_x * 2
    assert g2.pool() is pool
    with pytest.raises(RuntimeError, match="holds no captured graph"):
        g.replay()
    with pytest.raises(RuntimeError, match="not capturing"):
        g.capture_end()


def test_nothing_is_captured_outside_the_block_and_replay_inside_one_is_refused():
    _, g, static_x, static_out = captured_forward()
    assert not tg.cuda.is_current_stream_capturing()
    with pytest.raises(tg.cuda.GraphCaptureError, match="nest"):
        with tg.cuda.graph(tg.cuda.CUDAGraph()):
            assert tg.cuda.is_current_stream_capturing()
            g.replay()
    (static_x + 1).cpu()  # eager work after a failed capture runs as usual
