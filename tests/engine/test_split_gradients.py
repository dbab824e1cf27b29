"""The pieces of ``split`` and ``chunk`` send their gradients into one array.

Each piece is an ``Index`` view. Its backward alone would make a zero array the size
of the whole input, write the piece's gradient into its block, and the engine would add
those arrays up. When the engine holds the input's gradient array alone, it adds each
further piece into its block of that array instead (``engine.add_piece``). These tests
hold it to the same bits as the usual way, check that it ran, and that it steps aside
wherever the array could be seen or shared: hooks, step records, retained graphs,
``tg.autograd.grad``, overlapping views, a learner's own backward.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import backward_steps, engine, parts

F = tg.nn.functional
# (the awkward values make inf - inf and 0 * inf on purpose)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytest.fixture
def pieces_added(monkeypatch):
    """How many piece gradients ``add_piece`` added in place (a list of one count)."""
    count = [0]
    original = engine.add_piece

    def counting(*args):
        done = original(*args)
        count[0] += done
        return done
    monkeypatch.setattr(engine, "add_piece", counting)
    return count


def _usual_way(monkeypatch):
    """Turn the shortcut off: every piece's backward runs as written."""
    monkeypatch.setattr(engine, "add_piece", lambda *args: False)


def _awkward(shape, seed, dtype=np.float64):
    """Random values with -0.0, +0.0, inf and nan among them (the bits to keep)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    flat = values.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = 0.0
    flat[5::13] = np.inf
    flat[9::17] = np.nan
    return values.astype(dtype)


def _qkv_gradients(dtype, seed=0, chunks=False):
    """The weight's and the input's gradients through a fused q/k/v linear and split."""
    x = tg.tensor(_awkward((3, 5, 4), seed, dtype), requires_grad=True)
    w = tg.tensor(_awkward((12, 4), seed + 1, dtype), requires_grad=True)
    upstream = [tg.tensor(_awkward((3, 5, 4), seed + 2 + i, dtype)) for i in range(3)]
    qkv = F.linear(x, w)
    q, k, v = qkv.chunk(3, dim=2) if chunks else qkv.split(4, dim=2)
    ((q * upstream[0]).sum() + (k * upstream[1]).sum() + (v * upstream[2]).sum()).backward()
    return x.grad.numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunks", [False, True])
def test_split_pieces_add_into_one_array_with_the_same_bits(dtype, chunks, monkeypatch,
                                                            pieces_added):
    fast = _qkv_gradients(dtype, chunks=chunks)
    assert pieces_added[0] == 2  # the second and third pieces went into the first's array
    _usual_way(monkeypatch)
    usual = _qkv_gradients(dtype, chunks=chunks)
    for a, b in zip(fast, usual):
        assert a.tobytes() == b.tobytes()


def test_the_gradient_of_the_pieces_is_theirs_in_place_with_zeros_signed_as_before(pieces_added):
    # pieces of a leaf, along the last dimension; -0.0 gradients come out as 0.0, as
    # 0.0 + (-0.0) does in the usual sum, and a dimension's blocks may come in any order
    a = tg.tensor(np.ones((2, 6)), requires_grad=True)
    upstream = _awkward((2, 6), 4)
    upstream[0] = -0.0  # (-0.0 in every piece, the first to arrive too)
    p1, p2, p3 = a.split([1, 2, 3], dim=1)
    total = (p3 * tg.tensor(upstream[:, 3:])).sum() + (p1 * tg.tensor(upstream[:, :1])).sum() \
        + (p2 * tg.tensor(upstream[:, 1:3])).sum()
    total.backward()
    assert pieces_added[0] == 2
    want = upstream + 0.0
    assert a.grad.numpy().tobytes() == want.tobytes()
    assert not np.signbit(a.grad.numpy()[upstream == 0]).any()
    assert a.grad._array.flags.c_contiguous


def test_the_same_gradient_flowing_two_ways(monkeypatch, pieces_added):
    def run():
        x = tg.tensor(_awkward((4, 6), 5), requires_grad=True)
        w = tg.tensor(_awkward((6, 6), 6), requires_grad=True)
        y = F.linear(x, w)
        a, b = y.split(3, dim=1)
        z = y * 2.0  # y's gradient: from both pieces and from z
        loss = (a * a).sum() + (b * 3.0).sum() + z.sum() + (a * b).sum()
        loss.backward()
        return x.grad.numpy().copy(), w.grad.numpy().copy()
    fast = run()
    _usual_way(monkeypatch)
    usual = run()
    for got, want in zip(fast, usual):
        assert got.tobytes() == want.tobytes()


def test_a_hook_on_the_split_tensor_sees_each_gradient_as_usual(pieces_added):
    y0 = tg.tensor(np.arange(12.0).reshape(2, 6), requires_grad=True)
    y = y0 * 1.0
    seen = []
    y.register_hook(lambda g: seen.append(g))  # the hook keeps the summed gradient
    a, b = y.split(3, dim=1)
    (a * 2.0).sum().add((b * 5.0).sum()).backward()
    assert pieces_added[0] == 0  # a node with hooks gets tensors: the usual way
    want = np.concatenate([np.full((2, 3), 2.0), np.full((2, 3), 5.0)], axis=1)
    np.testing.assert_array_equal(seen[0].numpy(), want)
    np.testing.assert_array_equal(y0.grad.numpy(), want)


def test_a_hook_on_a_piece_keeps_what_it_was_given(pieces_added):
    x = tg.tensor(np.ones((2, 4)), requires_grad=True)
    w = tg.tensor(np.eye(4), requires_grad=True)
    a, b = F.linear(x, w).split(2, dim=1)
    kept = []
    b.register_hook(lambda g: kept.append(g))
    ((a * 3.0).sum() + (b * 7.0).sum()).backward()
    assert pieces_added[0] == 1
    np.testing.assert_array_equal(kept[0].numpy(), np.full((2, 2), 7.0))  # not written into
    np.testing.assert_array_equal(x.grad.numpy(), np.array([[3.0, 3.0, 7.0, 7.0]] * 2))


def test_retain_graph_and_a_second_backward(pieces_added):
    x = tg.tensor(np.ones((2, 4)), requires_grad=True)
    w = tg.tensor(np.eye(4) * 2.0, requires_grad=True)
    a, b = F.linear(x, w).split(2, dim=1)
    loss = (a * 3.0).sum() + (b * 7.0).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    assert pieces_added[0] == 2
    np.testing.assert_array_equal(first, np.array([[6.0, 6.0, 14.0, 14.0]] * 2))
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first)


def test_step_records_show_each_pieces_gradient_as_before(pieces_added):
    x = tg.tensor(np.ones((2, 4)), requires_grad=True)
    a, b = (x * 1.0).split(2, dim=1)
    loss = (a * 3.0).sum() + (b * 7.0).sum()
    steps = list(backward_steps(loss, records=True))
    assert pieces_added[0] == 0  # records show tensors: no arrays kept, the usual way
    index_steps = [s for s in steps if s.node is not None and s.node.name() == "IndexBackward"]
    assert len(index_steps) == 2
    for step in index_steps:
        assert tuple(step.grad_inputs[0].shape) == (2, 4)  # a whole zero-filled array each
    np.testing.assert_array_equal(x.grad.numpy(), np.array([[3.0, 3.0, 7.0, 7.0]] * 2))


def test_autograd_grad_of_the_split_tensor_and_of_the_leaf(pieces_added):
    x = tg.tensor(np.ones((2, 4)), requires_grad=True)
    w = tg.tensor(np.eye(4), requires_grad=True)
    y = F.linear(x, w)
    a, b = y.split(2, dim=1)
    loss = (a * 3.0).sum() + (b * 7.0).sum()
    gy, gw = tg.autograd.grad(loss, (y, w), retain_graph=True)
    want = np.array([[3.0, 3.0, 7.0, 7.0]] * 2)
    np.testing.assert_array_equal(gy.numpy(), want)
    np.testing.assert_array_equal(gw.numpy(), want.T @ np.ones((2, 4)))
    assert pieces_added[0] == 0  # (grad's hook on y: y's node gets tensors, the usual way)
    a, b = F.linear(x, w).split(2, dim=1)
    (gx,) = tg.autograd.grad((a * 3.0).sum() + (b * 7.0).sum(), x)
    assert pieces_added[0] == 1
    np.testing.assert_array_equal(gx.numpy(), want)
    assert x.grad is None and w.grad is None


def test_overlapping_views_and_blocks_in_two_dimensions_take_the_usual_way(monkeypatch,
                                                                          pieces_added):
    def run():
        x = tg.tensor(_awkward((4, 6), 7), requires_grad=True)
        y = F.linear(x, tg.tensor(np.eye(6)))
        loss = (y[:, 0:3] * 2.0).sum() + (y[:, 2:5] * -1.0).sum() + (y[1:3, 5:6] * 4.0).sum() \
            + (y[:, ::2] * 3.0).sum()
        loss.backward()
        return x.grad.numpy().copy()
    fast = run()
    assert pieces_added[0] == 0
    _usual_way(monkeypatch)
    assert fast.tobytes() == run().tobytes()


def test_pieces_along_different_dimensions_are_not_mixed(monkeypatch, pieces_added):
    def run():
        x = tg.tensor(_awkward((4, 6), 8), requires_grad=True)
        y = F.linear(x, tg.tensor(np.eye(6)))
        top, bottom = y.split(2, dim=0)
        left, right = y.split(3, dim=1)
        loss = (top * 2.0).sum() + (left * 5.0).sum() + (bottom * -3.0).sum() \
            + (right * 0.5).sum()
        loss.backward()
        return x.grad.numpy().copy()
    fast = run()
    assert pieces_added[0] == 1  # (top then bottom; left and right meet a sum)
    _usual_way(monkeypatch)
    assert fast.tobytes() == run().tobytes()


def test_a_learners_index_backward_runs_for_every_piece(pieces_added):
    from teachgrad.ops.indexing import Index
    calls = []

    def my_backward(ctx, grad):
        calls.append(tuple(grad.shape))
        full = tg.zeros(ctx.shape, dtype=grad.dtype)
        full[ctx.index] = grad
        return full, None

    x = tg.tensor(np.ones((2, 4)), requires_grad=True)
    with parts.plugged("backward:Index", my_backward):
        assert not Index.fresh_gradients and Index.gradient_block is None
        a, b = F.linear(x, tg.tensor(np.eye(4))).split(2, dim=1)
        ((a * 3.0).sum() + (b * 7.0).sum()).backward()
    assert Index.fresh_gradients and Index.gradient_block is not None
    assert calls == [(2, 2), (2, 2)] and pieces_added[0] == 0
    np.testing.assert_array_equal(x.grad.numpy(), np.array([[3.0, 3.0, 7.0, 7.0]] * 2))


def test_the_gpt_attention_split_uses_it(pieces_added):
    from teachgrad import gpt
    tg.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    idx = tg.tensor(np.random.default_rng(0).integers(0, 11, (2, 8)))
    model.loss(idx, idx).backward()
    assert pieces_added[0] == 2  # one layer: k and q added into v's array


def test_a_new_array_sent_along_two_edges_is_summed_into_by_neither():
    class SharedGradient(tg.autograd.Function):  # one new array for both inputs
        formula_on_arrays = True
        fresh_gradients = True

        @staticmethod
        def forward(ctx, a, b):
            return ctx.backend.binary("add", a._array, b._array)

        @staticmethod
        def backward(ctx, grad):
            shared = grad * 1.0
            return shared, shared

    a = tg.tensor(np.ones(3), requires_grad=True)
    b = tg.tensor(np.ones(3), requires_grad=True)
    others = (a * 2.0).sum() + (b * 3.0).sum()  # (made first: their backward runs last)
    (others + SharedGradient.apply(a, b).sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 3.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(3, 4.0))
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    assert a.grad._array is not b.grad._array


def test_an_array_passed_on_by_a_node_is_no_longer_the_engines_alone():
    a = tg.tensor(np.ones((2, 3)), requires_grad=True)
    b = tg.tensor(np.ones((2, 3)), requires_grad=True)
    others = (a * 2.0).sum() + (b * 3.0).sum()  # (made first: their gradients come last)
    z = a + b  # add's backward passes linear's new gradient array on to a and b alike
    (others + F.linear(z, tg.tensor(np.eye(3) * 5.0)).sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 7.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((2, 3), 8.0))
