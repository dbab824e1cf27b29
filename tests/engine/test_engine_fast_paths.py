"""The engine's shortcuts give exactly what the full paths give, and step aside when they must.

* ``autograd/lean.py``: tensor arithmetic with nothing recorded goes straight to the
  backend; while recording, plain operands go straight to the Function.
* ``engine.backward_steps(records=False)``: what ``backward()`` runs, no step records.
* ``Function.formula_on_arrays``: on the numpy backend the engine runs such a backward
  formula on the arrays themselves, and passes gradients between such nodes as arrays.
* the numba CPU backend's flat loops for contiguous operands.
* ``Function.fresh_gradients``: a leaf keeps a new gradient array (a linear layer's) as
  its ``.grad`` without copying it, when nothing else can hold that array.
"""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import backward_steps, function
from teachgrad.backends import set_cpu_backend
from teachgrad.backends.numba_cpu import NumbaCPUBackend
from teachgrad.backends.numpy_backend import NumpyBackend
from teachgrad.ops import functional as F
from teachgrad.ops.elementwise import Mul

# (operator, the public function it shortcuts: the full path, with all its checks)
BINARY = [(lambda a, b: a + b, F.add), (lambda a, b: a - b, F.sub),
          (lambda a, b: a * b, F.mul), (lambda a, b: a / b, F.div)]
UNARY = [(lambda a: -a, F.neg), (lambda a: a.exp(), F.exp), (lambda a: a.log(), F.log),
         (lambda a: a.sqrt(), F.sqrt), (lambda a: a.sin(), F.sin), (lambda a: a.cos(), F.cos),
         (lambda a: a.tanh(), F.tanh), (lambda a: a.sigmoid(), F.sigmoid)]


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("op", range(len(BINARY)))
def test_unrecorded_arithmetic_matches_the_full_path(dtype, op):
    rng = np.random.default_rng(op)
    a = tg.tensor(rng.random((3, 5)) + 0.5, dtype=dtype)
    b = tg.tensor(rng.random((3, 5)) + 0.5, dtype=dtype)
    fn, full_fn = BINARY[op]
    with tg.no_grad():
        for x, y in [(a, b), (a, 2), (a, 0.3), (3, a), (1.5, a)]:
            lean, full = fn(x, y), full_fn(x, y)
            assert lean.dtype is full.dtype is dtype and lean.shape == full.shape
            np.testing.assert_array_equal(lean.numpy(), full.numpy())
            assert lean.grad_fn is None and not lean.requires_grad


@pytest.mark.parametrize("op", range(len(UNARY)))
def test_unrecorded_unary_functions_match_the_full_path(op):
    a = tg.tensor(np.random.default_rng(op).random(7) + 0.1, dtype=tg.float64)
    fn, full_fn = UNARY[op]
    with tg.no_grad():
        np.testing.assert_array_equal(fn(a).numpy(), full_fn(a).numpy())
    x = a.detach().requires_grad_()
    recorded, full = fn(x), full_fn(x)  # recording: the same Function, the same values
    assert recorded.grad_fn.function is full.grad_fn.function
    np.testing.assert_array_equal(recorded.detach().numpy(), full.detach().numpy())


def test_integer_and_broadcast_operands_take_the_full_path():
    i = tg.tensor([1, 2, 3])
    with tg.no_grad():
        assert (i / 2).dtype is tg.float32  # promotion only the full path does
        assert (-i).dtype is tg.int64 and (i * 2).dtype is tg.int64
        row = tg.ones(3) + tg.ones(2, 3)  # broadcasting: checked by the full path
        assert row.shape == (2, 3)
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match"):
            tg.ones(3) + tg.ones(2)


def test_an_observer_sees_unrecorded_arithmetic_too():
    seen = []

    def watch(cls, args, kwargs):
        seen.append(cls.__name__)
        return cls._apply(*args, **kwargs)

    a = tg.ones(4)
    function.observer = watch
    try:
        with tg.no_grad():
            (a * 2 + a).tanh()
            -a
    finally:
        function.observer = None
    assert seen == ["Mul", "Add", "Tanh", "Neg"]


def test_recorded_plain_operands_still_leave_every_node():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    y = ((x * 3 + 1) / x - x).tanh().sigmoid()
    names, node = [], y.grad_fn
    while node is not None and hasattr(node, "function"):
        names.append(node.name())
        node = node.next_functions[0][0]
    assert names == ["SigmoidBackward", "TanhBackward", "SubBackward", "DivBackward",
                     "AddBackward", "MulBackward"]
    y.sum().backward()
    ok = tg.autograd.gradcheck(lambda t: ((t * 3 + 1) / t - t).tanh().sigmoid(),
                               (tg.tensor([0.5, -1.0], dtype=tg.float64, requires_grad=True),))
    assert ok


def test_the_plain_recorder_builds_the_node_the_full_path_builds():
    """``function.apply_plain`` writes a Node's fields out: the same fields as ``_apply``."""
    from teachgrad.autograd.function import Node
    from teachgrad.ops.elementwise import Add, Sub, Tanh

    x = tg.tensor([0.5, -1.0], requires_grad=True)
    w = (x * 2).detach().requires_grad_() * 1.0  # made by a node: an edge to its grad_fn
    c = tg.tensor([3.0, 4.0])  # no gradient, small: a constant the graph view shows
    cases = [(Mul, (x, w)), (Mul, (x, 0.5)), (Sub, (1.0, x)), (Add, (w, c)), (Tanh, (w,))]
    for fn, args in cases:
        like = next(a for a in args if isinstance(a, tg.Tensor) and a.requires_grad)
        lean, full = function.apply_plain(fn, args, like).grad_fn, fn._apply(*args).grad_fn
        for field in Node.__slots__:
            if field in ("_ctx", "sequence"):
                continue
            got, want = getattr(lean, field), getattr(full, field)
            if field in ("constants", "output_values"):
                assert repr(got) == repr(want), (fn.__name__, field)
            else:
                assert got == want, (fn.__name__, field, got, want)
        assert lean.ctx.needs_input_grad == full.ctx.needs_input_grad
        # the plain path's node is its own context, holding what forward saved there
        assert lean.ctx is lean and type(full.ctx) is function.Context
        for name in ("backend", "device", "_out_version"):
            assert repr(getattr(lean.ctx, name)) == repr(getattr(full.ctx, name)), name
        assert [type(t) for t in lean.ctx._saved] == [type(t) for t in full.ctx._saved]
        assert (lean.ctx._out is None) is (full.ctx._out is None)


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_a_whole_tensor_reduction_builds_what_the_full_path_builds(dtype, name):
    """``x.sum()``/``x.mean()`` of a float32/float64 tensor go to ``function.apply_one``:
    the same value (bits), node fields, context and gradient as the public function."""
    from teachgrad.autograd.function import Node

    full_fn = getattr(F, name)
    rng = np.random.default_rng(len(name))
    x = tg.tensor(rng.standard_normal((3, 7)) * 100, dtype=dtype, requires_grad=True)
    for a in (x, x * 1.5, x[:, 1:6:2]):  # a leaf, a node's output, a strided view
        lean, full = getattr(a, name)(), full_fn(a)
        assert lean.shape == () and lean.dtype is dtype and lean.requires_grad
        np.testing.assert_array_equal(lean.detach().numpy(), full.detach().numpy())
        got, want = lean.grad_fn, full.grad_fn
        assert type(got) is Node and got.function is want.function
        for field in Node.__slots__:
            if field in ("_ctx", "sequence"):
                continue
            assert repr(getattr(got, field)) == repr(getattr(want, field)), field
        mine, theirs = got.ctx, want.ctx
        assert {k: repr(v) for k, v in vars(mine).items()} == \
            {k: repr(v) for k, v in vars(theirs).items()}
        assert mine._recording and mine.needs_input_grad == (True, False, False)
        first = tg.autograd.grad(lean, x, retain_graph=True)[0].numpy()
        np.testing.assert_array_equal(first, tg.autograd.grad(full, x)[0].numpy())
    with tg.no_grad():  # nothing recorded, the same value
        plain = getattr(x, name)()
        assert plain.grad_fn is None and not plain.requires_grad
        np.testing.assert_array_equal(plain.numpy(), full_fn(x).detach().numpy())
    c = x.detach()  # no gradient wanted: no node, forward alone
    assert getattr(c, name)().grad_fn is None
    assert tg.autograd.gradcheck(lambda t: getattr(t.sin() * t, name)(),
                                 (tg.tensor(rng.random(5), dtype=tg.float64, requires_grad=True),))


def test_reductions_the_shortcut_does_not_take_keep_the_full_path(monkeypatch):
    taken = []
    real = function.apply_one
    monkeypatch.setattr(function, "apply_one", lambda *a: taken.append(a[0].__name__) or real(*a))
    x = tg.tensor(np.arange(6.0).reshape(2, 3), dtype=tg.float32, requires_grad=True)
    assert x.sum(0).shape == (3,) and x.mean(dim=1, keepdim=True).shape == (2, 1)
    assert x.sum(keepdim=True).shape == (1, 1)
    half = x.detach().to(tg.float16)  # (a 16-bit sum runs in float32: the full path rounds)
    assert half.sum().dtype is tg.float16 and half.sum().item() == 15.0
    assert tg.tensor([1, 2, 3]).sum().dtype is tg.int64
    assert tg.tensor([True, False, True]).sum().item() == 2
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        tg.tensor([1, 2]).mean()
    assert taken == []
    x.sum(), x.mean()
    assert taken == ["Sum", "Mean"]
    seen = []  # an observer (a trace) sees every reduction, as every other operation

    def watch(cls, args, kwargs):
        seen.append(cls.__name__)
        return cls._apply(*args, **kwargs)

    monkeypatch.setattr(function, "observer", watch)
    x.sum(), x.mean()
    assert seen == ["Sum", "Mean"] and taken == ["Sum", "Mean"]


def test_the_numpy_backends_whole_array_reduce_keeps_numpys_bits():
    backend = NumpyBackend()
    rng = np.random.default_rng(3)
    for dtype in (np.float16, np.float32, np.float64):
        for shape in ((0,), (1,), (7,), (1000,), (3, 5, 4)):
            x = (rng.standard_normal(shape) * 50).astype(dtype)
            if x.size > 4:
                x.flat[4] = np.nan if dtype is np.float32 else np.inf
            for op, ufunc in (("sum", np.add), ("max", np.maximum), ("min", np.minimum)):
                if not x.size and op != "sum":
                    with pytest.raises(ValueError, match="zero-size array"):
                        backend.reduce(op, x, None, False)
                    continue
                got = backend.reduce(op, x, None, False)
                want = np.asarray(ufunc.reduce(x, axis=None))
                assert type(got) is np.ndarray and got.shape == () and got.dtype == x.dtype
                np.testing.assert_array_equal(got, want)
        x = rng.standard_normal((4, 6)).astype(dtype).T  # not contiguous
        np.testing.assert_array_equal(backend.reduce("sum", x, None, False), np.add.reduce(x, None))


def test_backward_without_records_runs_the_same_steps_as_the_stepper():
    def chain(y0, w):
        y = y0
        for _ in range(3):
            y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5
        return y.sum()

    rng = np.random.default_rng(0)
    values = rng.standard_normal(5), rng.standard_normal(5)
    grads = []
    for mode in ("backward", "stepper", "no records"):
        y0, w = (tg.tensor(v, dtype=tg.float64, requires_grad=True) for v in values)
        loss = chain(y0, w)
        if mode == "backward":
            loss.backward()
        elif mode == "stepper":
            steps = list(backward_steps(loss))
            assert [s.index for s in steps] == list(range(len(steps))) and steps[-1].pending == 0
            assert any(any(s.accumulated) for s in steps)  # y and w are reused: merges
        else:
            assert set(backward_steps(loss, records=False)) == {None}
        grads.append((y0.grad.numpy(), w.grad.numpy()))
    for other in grads[1:]:
        for got, want in zip(other, grads[0]):
            np.testing.assert_array_equal(got, want)


# Graphs over every Function marked formula_on_arrays (and some that are not), with
# broadcasting, 0-d tensors, reuse, transposes and a leaf that already has a .grad.
def _graph_elementwise(x, w, b):
    y = (x * w + b).tanh() - (x / (w * w + 1)).sigmoid() * 0.5
    z = (y.exp() + (w * w + 1).log() + (x * x + 1).sqrt()).relu() - -y
    return (z * z).sum() + (x.sin() * b).sum()


def _graph_linear(x, w, b):
    h = tg.nn.functional.linear(x, w, b).relu()
    return (tg.nn.functional.linear(h, w.T) * 2).mean()  # a transposed weight: non-contiguous gradients


def _graph_scalars(x, w, b):
    s = (x * w).sum()  # 0-d from here on: numpy hands back scalars for 0-d arithmetic
    return ((s * s).tanh() + (s / 3).sigmoid() - s.exp() * 0.1) * b.sum()


GRAPHS = {
    "elementwise": (_graph_elementwise, [(3, 4), (1, 4), (3, 1)]),
    "linear": (_graph_linear, [(5, 4), (4, 4), (4,)]),
    "scalars": (_graph_scalars, [(6,), (6,), (2,)]),
}


def _gradients(graph, shapes, dtype, *, arrays: bool, how: str = "backward"):
    rng = np.random.default_rng(7)
    values = [rng.standard_normal(s) for s in shapes]
    previous = NumpyBackend.array_arithmetic
    NumpyBackend.array_arithmetic = arrays  # False: every formula runs on tensors
    try:
        leaves = [tg.tensor(v, dtype=dtype, requires_grad=True) for v in values]
        leaves[0].grad = tg.ones(*shapes[0], dtype=dtype)  # accumulates into a held .grad
        loss = graph(*leaves)
        nodes = _nodes(loss.grad_fn)
        assert any(n.on_arrays for n in nodes) is arrays
        if how == "backward":
            loss.backward()
        else:
            list(backward_steps(loss))  # with step records: arrays inside each formula only
    finally:
        NumpyBackend.array_arithmetic = previous
    return [t.grad for t in leaves]


def _nodes(root):
    seen, todo = [], [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen or not hasattr(node, "on_arrays"):
            continue
        seen.append(node)
        todo.extend(n for n, _ in node.next_functions)
    return [n for n in seen if type(n) is function.Node]


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64])
@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("how", ["backward", "stepper"])
def test_formulas_on_arrays_give_exactly_the_tensor_formulas_gradients(name, dtype, how):
    graph, shapes = GRAPHS[name]
    want = _gradients(graph, shapes, dtype, arrays=False)
    got = _gradients(graph, shapes, dtype, arrays=True, how=how)
    for g, w in zip(got, want):
        assert type(g) is tg.Tensor and g.dtype is dtype and g.shape == w.shape
        assert g.is_contiguous()
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_formulas_on_arrays_with_several_roots_one_above_the_other():
    """A root's own gradient (a tensor) meets gradients kept as arrays from another root."""
    def run(arrays):
        previous = NumpyBackend.array_arithmetic
        NumpyBackend.array_arithmetic = arrays
        try:
            x = tg.tensor([0.5, -1.0, 2.0], dtype=tg.float64, requires_grad=True)
            y = x * 3
            z = (y * 2).tanh() * y
            tg.autograd.backward([y, z], [tg.tensor([1.0, 2.0, 3.0], dtype=tg.float64),
                                          tg.tensor([0.5, 0.25, -1.0], dtype=tg.float64)])
            assert y.grad_fn.on_arrays is arrays
        finally:
            NumpyBackend.array_arithmetic = previous
        return x.grad.numpy()

    np.testing.assert_array_equal(run(True), run(False))


def test_formulas_on_arrays_pass_a_float64_gradcheck():
    rng = np.random.default_rng(3)
    for graph, shapes in GRAPHS.values():
        leaves = [tg.tensor(rng.standard_normal(s), dtype=tg.float64, requires_grad=True)
                  for s in shapes]
        assert any(n.on_arrays for n in _nodes(graph(*leaves).grad_fn))
        assert tg.autograd.gradcheck(graph, tuple(leaves))


def test_which_nodes_run_their_formula_on_arrays():
    x = tg.randn(3, requires_grad=True)
    assert (x * 2).grad_fn.on_arrays and (x * x).tanh().grad_fn.on_arrays
    assert x.sum().grad_fn.on_arrays and x.mean().grad_fn.on_arrays  # (expand: the backend's view)
    assert not x.max().grad_fn.on_arrays  # its formula uses tensor methods
    # inputs of two dtypes: numpy would promote where tensors do not, so tensors it is
    assert not Mul.apply(x, tg.ones(3, dtype=tg.float64)).grad_fn.on_arrays
    set_cpu_backend("numba", wait=True)  # numpy arrays too, but its arithmetic is its own loops
    try:
        assert not (tg.randn(3, requires_grad=True) * 2).grad_fn.on_arrays
    finally:
        set_cpu_backend("numpy")


def test_hooks_and_custom_functions_always_see_tensors():
    seen = []

    class Twice(tg.autograd.Function):  # not marked: its backward gets tensors
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            seen.append(("custom", type(grad)))
            return grad * 2

    x = tg.randn(4, requires_grad=True)
    mid = (x * 3).tanh()
    mid.register_hook(lambda g: seen.append(("hook", type(g))))
    x.register_hook(lambda g: seen.append(("leaf hook", type(g))))
    loss = (Twice.apply(mid.sigmoid()) * mid).sum()
    loss.backward()
    assert sorted(seen, key=str) == [("custom", tg.Tensor), ("hook", tg.Tensor),
                                     ("leaf hook", tg.Tensor)]
    y = x.detach().requires_grad_()
    ((Twice.apply((y * 3).tanh().sigmoid()) * (y * 3).tanh()).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-6)


def test_an_array_formula_with_a_wrong_gradient_is_still_refused():
    class Outer(function.Function):
        formula_on_arrays = True

        @staticmethod
        def forward(ctx, a):
            return ctx.backend.binary("mul", a._array, 2.0)

        @staticmethod
        def backward(ctx, grad):
            return grad[:2] * 2  # a (2,) gradient for a (3,) input

    x = tg.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"OuterBackward returned a gradient of shape "
                                           r"\[2\] for input 0, which has shape \[3\]"):
        Outer.apply(x).sum().backward()
    assert x.grad is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 7, 33, 1000])
def test_numba_flat_loops_match_numpy_on_ragged_sizes(dtype, size):
    numba, ref = NumbaCPUBackend(), NumpyBackend()
    rng = np.random.default_rng(size)
    a = (rng.random((size,)) + 0.5).astype(dtype)
    b = (rng.random((size,)) + 0.5).astype(dtype)
    for op in ("add", "sub", "mul", "div"):
        for x, y in [(a, b), (a, 0.5), (a, 3)]:
            got, want = numba.binary(op, x, y), ref.binary(op, x, y)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13)
    for op in ("neg", "exp", "tanh"):
        np.testing.assert_allclose(numba.unary(op, a), ref.unary(op, a), rtol=1e-6)
    m = a.reshape(1, -1)
    for axes, keep in [(None, False), ((0, 1), True)]:
        got, want = numba.reduce("sum", m, axes, keep), ref.reduce("sum", m, axes, keep)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_ufuncs_match_numpy_on_any_layout(dtype):
    """Two arrays of one float dtype on one core: numba's compiled ufunc, any shape or layout."""
    from teachgrad.backends import numba_flat

    numba, ref = NumbaCPUBackend(), NumpyBackend()
    rng = np.random.default_rng(5)

    def arr(*shape):
        return (rng.random(shape) + 0.5).astype(dtype)

    pairs = [(arr(1), arr(1)), (arr(7), arr(7)), (arr(4099), arr(4099)), (arr(3, 5), arr(5)),
             (arr(3, 1), arr(1, 4)), (arr(5, 3).T, arr(3, 5)), (arr(6)[::2], arr(3)),
             (np.asarray(arr()), np.asarray(arr())), (arr(0), arr(0)), (arr(2, 0), arr(0))]
    for op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
        for a, b in pairs:
            got, want = numba.binary(op, a, b), ref.binary(op, a, b)
            assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
            if op == "pow":  # (libm's pow and numpy's may differ in the last bit)
                np.testing.assert_allclose(got, want, rtol=4e-7 if dtype == np.float32 else 1e-15)
            else:
                np.testing.assert_array_equal(got, want)
    assert set(numba_flat._UFUNCS) >= {"add", "sub", "mul", "div"}  # the ufunc path ran
    with np.errstate(divide="ignore", invalid="ignore"):  # division by zero: inf and nan
        z = np.array([1.0, -1.0, 0.0], dtype)
        np.testing.assert_array_equal(numba.binary("div", z, np.zeros(3, dtype)),
                                      [np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (0,), (4099,), (300, 250), "strided"])
def test_numpy_sigmoid_is_the_two_branch_formula_exactly(dtype, shape):
    """1/(1+e^-|x|) for x >= 0 and e^-|x|/(1+e^-|x|) below, bit for bit, never overflowing
    (small arrays in fresh temporaries, large ones, (300, 250), in one buffer; a strided
    view of a large array too)."""
    rng = np.random.default_rng(len(shape))
    if shape == "strided":
        x = (rng.standard_normal((500, 302)) * 40).astype(dtype)[::2, 1:].T
        assert not x.flags.c_contiguous and x.nbytes > 1 << 16
    else:
        x = np.asarray(rng.standard_normal(shape) * 40).astype(dtype)
    if x.size >= 6:
        x.flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1e4]
    e = np.exp(-np.abs(x))
    want = np.asarray(np.where(x >= 0, 1, e) / (1 + e))
    with np.errstate(over="raise", invalid="ignore"):  # no overflow, even at -1e4
        got = NumpyBackend().unary("sigmoid", x)
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_numpy_sigmoid_of_one_number_gives_the_same_bits_as_of_many(dtype):
    """One element takes a branch picked by its sign; each gives what the whole-array
    formula gives that element, down to the sign of zero, for every awkward value."""
    info = np.finfo(dtype)
    values = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1e4, 1e4, 3.5, -3.5, 0.25, -0.25,
                       info.tiny / 4, -info.tiny / 4, info.eps, -info.eps, 20.0, -20.0, 88.0, -88.0,
                       -700.0, info.max, -info.max], dtype)
    backend = NumpyBackend()
    with np.errstate(over="raise", invalid="ignore"):
        many = backend.unary("sigmoid", values)
        for value, want in zip(values, many):
            for shape in [(), (1,), (1, 1)]:
                got = backend.unary("sigmoid", np.full(shape, value, dtype))
                assert type(got) is np.ndarray and got.shape == shape and got.dtype == dtype
                if np.isnan(want):
                    assert np.isnan(got).all()
                else:
                    assert got.reshape(()).tobytes() == want.tobytes(), (value, got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(), (5,), (2049,), (300, 250), "strided"])
def test_numpy_relu_is_maximum_with_zero_exactly_on_both_paths(dtype, shape):
    """Small arrays compare with the number 0, large ones with an array of zeros (numpy's
    fast loop): the same bits either way, nan kept, -0.0 and -inf to 0."""
    rng = np.random.default_rng(3)
    if shape == "strided":
        x = (rng.standard_normal((400, 300)) * 5).astype(dtype)[::2, 1:].T
    else:
        x = np.asarray(rng.standard_normal(shape) * 5).astype(dtype)
    if x.size >= 5 and np.issubdtype(dtype, np.floating):
        x.flat[:5] = [-0.0, 0.0, np.nan, -np.inf, np.inf]
    want = np.maximum(x, 0)
    got = NumpyBackend().unary("relu", x)
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == x.shape
    assert got.tobytes() == want.tobytes()  # (bit for bit, in C order)


# -- a leaf's first gradient taken over without a copy (Function.fresh_gradients) -------

def _linear_grads(x, w, b, seed=0):
    """Gradients of sum((x @ w.T + b) * r) by hand: r is the upstream gradient."""
    r = np.random.default_rng(seed).standard_normal((x.shape[0], w.shape[0]))
    return r @ w, r.T @ x, r.sum(0), r


def test_a_linear_layers_gradients_are_kept_without_a_copy(monkeypatch):
    from teachgrad.autograd import engine
    copies = []
    own_copy = engine._own_copy
    monkeypatch.setattr(engine, "_own_copy", lambda a, backend: copies.append(a.shape) or own_copy(a, backend))
    rng = np.random.default_rng(1)
    xs, ws, bs = rng.standard_normal((5, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)
    x, w, b = (tg.tensor(v, requires_grad=True) for v in (xs, ws, bs))
    dx, dw, db, r = _linear_grads(xs, ws, bs)
    (tg.nn.functional.linear(x, w, b) * tg.tensor(r)).sum().backward()
    assert copies == []  # x, w and b keep the arrays linear's backward made
    for t, want in ((x, dx), (w, dw), (b, db)):
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-12)
        assert t.grad._array.flags.c_contiguous and t.grad._array.flags.owndata
    # the three are separate arrays: writing into one changes no other
    w.grad.zero_()
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), db, rtol=1e-12)
    # a second backward adds into new storage, as before
    held = w.grad
    (tg.nn.functional.linear(x, w, b) * tg.tensor(r)).sum().backward()
    assert w.grad is held
    np.testing.assert_allclose(w.grad.numpy(), dw, rtol=1e-12)


def test_matmul_gradients_are_kept_without_a_copy_unless_they_are_views(monkeypatch):
    from teachgrad.autograd import engine
    copies = []
    own_copy = engine._own_copy
    monkeypatch.setattr(engine, "_own_copy", lambda a, backend: copies.append(a.shape) or own_copy(a, backend))
    rng = np.random.default_rng(4)
    xs, ws, r = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    x, w = tg.tensor(xs, requires_grad=True), tg.tensor(ws, requires_grad=True)
    ((x @ w) * tg.tensor(r)).sum().backward()
    assert copies == []
    np.testing.assert_allclose(x.grad.numpy(), r @ ws.T, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), xs.T @ r, rtol=1e-12)
    # W.T in the product: W's gradient comes back through the transpose as a view, so
    # W gets its own copy; a 1-D operand's gradient is a squeezed view: copied too
    w2 = tg.tensor(ws.T.copy(), requires_grad=True)
    v = tg.tensor(xs[0], requires_grad=True)
    ((v @ w2.T) * tg.tensor(r[0])).sum().backward()
    assert sorted(copies) == [(3, 4), (4,)]
    np.testing.assert_allclose(w2.grad.numpy(), np.outer(r[0], xs[0]), rtol=1e-12)
    np.testing.assert_allclose(v.grad.numpy(), ws @ r[0], rtol=1e-12)


def test_a_gradient_someone_else_holds_is_still_copied(monkeypatch):
    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    dx, dw, db, r = _linear_grads(xs, ws, np.zeros(2), seed=3)
    # a hook on the leaf sees the gradient tensor (and may keep it): the leaf copies
    w = tg.tensor(ws, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g))
    (tg.nn.functional.linear(tg.tensor(xs), w) * tg.tensor(r)).sum().backward()
    w.grad.zero_()
    np.testing.assert_allclose(seen[0].numpy(), dw, rtol=1e-12)
    # the stepper's records show each gradient: the leaf's own is a copy of what they show
    w2 = tg.tensor(ws, requires_grad=True)
    loss = (tg.nn.functional.linear(tg.tensor(xs), w2) * tg.tensor(r)).sum()
    steps = list(backward_steps(loss, records=True))
    w2.grad.zero_()
    leaf_step = next(s for s in steps if s.leaf is w2)
    np.testing.assert_allclose(leaf_step.grad_outputs[0].numpy(), dw, rtol=1e-12)
    # one weight in two layers: two gradients summed, and the sum is the leaf's alone
    w3 = tg.tensor(ws, requires_grad=True)
    x1, x2 = tg.tensor(xs), tg.tensor(xs[::-1].copy())
    out = (tg.nn.functional.linear(x1, w3) * tg.tensor(r)).sum() \
        + (tg.nn.functional.linear(x2, w3) * tg.tensor(r)).sum()
    out.backward()
    np.testing.assert_allclose(w3.grad.numpy(), r.T @ xs + r.T @ xs[::-1], rtol=1e-12)


_NUMPY_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                 "pow": np.power, "maximum": np.maximum, "lt": np.less, "eq": np.equal}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_numpy_binary_with_a_python_float_gives_numpys_own_bits(dtype):
    """A Python float beside an array goes in as a kept 0-d array of the array's dtype:
    every result is the one numpy gives the number itself, on either side, for signed
    zeros, nan, infinities and numbers too large for the dtype as well; the kept arrays
    are really used (and read-only)."""
    from teachgrad.backends import numpy_backend

    backend = NumpyBackend()
    x = (np.random.default_rng(5).standard_normal(37) * 10).astype(dtype)
    x[:3] = [0.0, -0.0, np.nan]
    numbers = [0.1, 0.5, -2.5, 1 / 3, 7.0, 1e-40, 3e38, 1e300, 0.0, -0.0, float("nan"),
               float("inf"), float("-inf")]
    for number in numbers:
        for op, ufunc in _NUMPY_UFUNCS.items():
            for args in ((x, number), (number, x)):
                with np.errstate(all="ignore"):
                    want = ufunc(*args)
                    for _ in range(2):  # the first call keeps the array, the second uses it
                        got = backend.binary(op, *args)
                        assert got.dtype == want.dtype
                        assert got.tobytes() == want.tobytes(), (op, number, args[0] is x)
    kept = numpy_backend._NUMBER_OPERANDS[np.dtype(dtype)]
    assert 0.1 in kept and kept[0.1].dtype == dtype and not kept[0.1].flags.writeable
    assert 0.0 not in kept and float("inf") not in kept  # the number itself, every time
    assert (1e300 in kept) == (dtype is np.float64)  # too large for float16 and float32


def test_numpy_sigmoid_of_one_integer_is_a_float_as_of_many():
    """Integers take the whole-array formula whatever their number: a float64 result, the
    same for one element as for several (the one-element float path is for floats only)."""
    backend = NumpyBackend()
    many = backend.unary("sigmoid", np.array([-3, 0, 2]))
    assert many.dtype == np.float64
    for i, value in enumerate([-3, 0, 2]):
        for shape in [(), (1,)]:
            got = backend.unary("sigmoid", np.full(shape, value))
            assert got.dtype == np.float64 and got.shape == shape
            assert got.tobytes() == many[i:i + 1].reshape(shape).tobytes()
