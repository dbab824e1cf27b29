"""addcmul, addcdiv and lerp (out of place, as methods, in place): values against numpy,
float64 gradient checks, PyTorch's errors, and the optimizers that update with them."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import gradcheck

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
C = (RNG.uniform(0.5, 2.0, (4,)) * RNG.choice([-1, 1], 4)).astype(np.float32)  # (no zeros)


def _t(*arrays, **kwargs):
    return [tg.tensor(a.copy(), **kwargs) for a in arrays]


@pytest.mark.parametrize("value", [1, 0.5, -3.0, 0])
def test_addcmul_and_addcdiv_against_numpy_with_broadcasting(value):
    a, b, c = _t(A, B, C)
    np.testing.assert_allclose(tg.addcmul(a, b, c, value=value).numpy(), A + np.float32(value) * (B * C),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a.addcdiv(b, c, value=value).numpy(), A + np.float32(value) * (B / C),
                               rtol=1e-6, atol=1e-6)
    # in place: the same values, written into a's own storage, its version bumped
    storage, version = a._array, a._version
    a.addcmul_(b, c, value=value)
    assert a._array is storage and a._version == version + 1
    np.testing.assert_allclose(a.numpy(), A + np.float32(value) * (B * C), rtol=1e-6, atol=1e-6)
    a2 = tg.tensor(A.copy())
    a2.addcdiv_(b, c, value=value)
    np.testing.assert_allclose(a2.numpy(), A + np.float32(value) * (B / C), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("weight", [0.0, 0.1, 0.4999, 0.5, 0.9, 1.0, -0.25, 1.5])
def test_lerp_is_the_two_ended_line_bit_for_bit(weight):
    """weight < 0.5 (in absolute value): start + w·(end − start); else end − (1 − w)·(end − start),
    PyTorch's formula (its kernel fuses multiply and add, so it may differ in the last bit),
    so lerp(start, end, 1) is end exactly."""
    start, end = _t(A, B)
    diff = B - A
    w = np.float32(weight)  # (the weight in the tensors' dtype, then 1 - w in that dtype)
    want = A + w * diff if abs(weight) < 0.5 else B - diff * (np.float32(1) - w)
    np.testing.assert_array_equal(tg.lerp(start, end, weight).numpy(), want)
    np.testing.assert_array_equal(start.lerp(end, weight).numpy(), want)
    storage = start._array
    start.lerp_(end, weight)
    assert start._array is storage
    np.testing.assert_array_equal(start.numpy(), want)


def test_lerp_weight_one_reaches_end_exactly_and_a_tensor_weight_picks_per_element():
    far = tg.tensor([1e8, 1e8, 3.0])
    end = tg.tensor([1.0, 1.0, 5.0])
    assert tg.lerp(far, end, 1.0).tolist() == [1.0, 1.0, 5.0]  # (1e8 + (1 - 1e8) would be 0)
    weights = tg.tensor([1.0, 0.25, 0.5])
    got = tg.lerp(far, end, weights).numpy()
    f, e, w = far.numpy(), end.numpy(), weights.numpy()
    want = np.where(np.abs(w) < 0.5, f + w * (e - f), e - (e - f) * (1 - w))
    np.testing.assert_array_equal(got, want)
    assert got[0] == 1.0
    in_place = far.clone()
    in_place.lerp_(end, weights)
    np.testing.assert_array_equal(in_place.numpy(), want)


def test_gradients_of_addcmul_addcdiv_and_lerp_float64():
    def inputs(*shapes):
        return [tg.tensor(RNG.standard_normal(s) + 3.0 * (i == 2), dtype=tg.float64,
                          requires_grad=True) for i, s in enumerate(shapes)]
    assert gradcheck(lambda x, y, z: tg.addcmul(x, y, z, value=-0.7), inputs((2, 3), (2, 3), (3,)))
    assert gradcheck(lambda x, y, z: tg.addcdiv(x, y, z, value=1.3), inputs((2, 3), (1, 3), (3,)))
    assert gradcheck(lambda x, y: tg.lerp(x, y, 0.3), inputs((2, 3), (2, 3)))
    assert gradcheck(lambda x, y: tg.lerp(x, y, 0.8), inputs((2, 3), (3,)))
    assert gradcheck(lambda x, y, w: tg.lerp(x, y, w), inputs((2, 3), (2, 3), (2, 3)))


def test_in_place_forms_are_recorded_inside_a_graph():
    def changed(x, y, z):
        h = x * 1.0  # (not a leaf: in-place changes to it are recorded)
        h.addcmul_(y, z, value=0.5)
        h.addcdiv_(y, z + 5.0, value=-2.0)
        h.lerp_(y, 0.7)
        h.lerp_(z, 0.2)
        return h * h
    xs = [tg.tensor(RNG.standard_normal((2, 3)), dtype=tg.float64, requires_grad=True)
          for _ in range(3)]
    assert gradcheck(changed, xs)


@pytest.mark.parametrize("call, error, words", [
    (lambda a, b: tg.addcmul(a, b, 2.0), TypeError, "'tensor2' must be a tensor"),
    (lambda a, b: tg.addcmul(a, b, b, value=True), TypeError, "'value' must be a number"),
    (lambda a, b: a.addcdiv_(b, b, value="1"), TypeError, "'value' must be a number"),
    (lambda a, b: tg.addcdiv(a, tg.ones(4, dtype=tg.int64), tg.ones(4, dtype=tg.int64)),
     RuntimeError, "Integer division with addcdiv"),
    (lambda a, b: tg.lerp(tg.ones(4, dtype=tg.int64), tg.ones(4, dtype=tg.int64), 0.5),
     RuntimeError, "expected a floating-point tensor"),
    (lambda a, b: tg.lerp(a, b.double(), 0.5), RuntimeError, "expected dtype teachgrad.float32 for `end`"),
    (lambda a, b: a.lerp_(b, "half"), TypeError, "'weight' must be a number"),
    (lambda a, b: a.lerp_(b, tg.ones(4, dtype=tg.float64)), RuntimeError, "for `weight`"),
    (lambda a, b: tg.ones(4, dtype=tg.int64).addcmul_(b, b), RuntimeError, "can't be cast"),
])
def test_bad_arguments_are_refused_with_pytorchs_errors(call, error, words):
    a, b = tg.ones(4), tg.full((4,), 2.0)
    with pytest.raises(error, match=words):
        call(a, b)


@pytest.mark.parametrize("method, args", [
    ("addcmul_", (tg.ones(3, 4), tg.ones(4))), ("addcdiv_", (tg.ones(3, 4), tg.ones(4))),
    ("lerp_", (tg.ones(3, 4), 0.25)), ("lerp_", (tg.ones(3, 4), 0.75)),
])
def test_in_place_forms_change_nothing_when_the_result_would_widen_the_tensor(method, args):
    small = tg.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        getattr(small, method)(*args)
    assert small.tolist() == [1.0, 2.0, 3.0, 4.0] and small._version == 0


def test_a_leaf_that_requires_grad_is_refused_outside_no_grad():
    w = tg.ones(3, requires_grad=True)
    for change in (lambda: w.addcmul_(tg.ones(3), tg.ones(3)), lambda: w.lerp_(tg.zeros(3), 0.1),
                   lambda: w.addcdiv_(tg.ones(3), tg.ones(3))):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            change()
    assert w.tolist() == [1.0, 1.0, 1.0]
    with tg.no_grad():
        w.lerp_(tg.zeros(3), 0.25)
    assert w.tolist() == [0.75, 0.75, 0.75]


def _adam_numpy(w, grads, lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
    """PyTorch's single-tensor Adam, step by step in float32 numpy (lerp, addcmul, addcdiv)."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    b1, b2 = (np.float32(b) for b in betas)
    for t, g in enumerate(grads, start=1):
        m = m + np.float32(1 - betas[0]) * (g - m)
        v = v * b2 + np.float32(1 - betas[1]) * (g * g)
        denominator = np.sqrt(v) / np.float32(np.sqrt(1 - betas[1] ** t)) + np.float32(eps)
        w = w + np.float32(-lr / (1 - betas[0] ** t)) * (m / denominator)
    return w


def test_adam_steps_as_pytorchs_single_tensor_adam():
    w0 = RNG.standard_normal(50).astype(np.float32)
    grads = [RNG.standard_normal(50).astype(np.float32) for _ in range(5)]
    w = tg.tensor(w0.copy(), requires_grad=True)
    opt = tg.optim.Adam([w], lr=1e-2)
    for g in grads:
        w.grad = tg.tensor(g)
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), _adam_numpy(w0, grads), rtol=2e-6, atol=1e-7)


@pytest.fixture(params=["numpy", "numba", "cuda"])
def where_(request):
    """(device, cpu backend) for each backend that runs these operations."""
    from teachgrad.backends import set_cpu_backend
    if request.param == "numba":
        set_cpu_backend("numba", wait=True)
        yield "cpu"
        set_cpu_backend("numpy")
    else:
        yield "cuda" if request.param == "cuda" else "cpu"


def test_every_backend_gives_the_numpy_backends_values(where_):
    """In place and out of place, on the numba CPU backend and on cuda (the simulator's
    kernels), against the same calls on numpy arrays; ragged sizes."""
    a, b = RNG.standard_normal((5, 7)).astype(np.float32), RNG.standard_normal((5, 7)).astype(np.float32)
    c = RNG.uniform(0.5, 2.0, 7).astype(np.float32)

    def on(device):
        x, y, z = (tg.tensor(v.copy(), device=device) for v in (a, b, c))
        out = [tg.addcmul(x, y, z, value=0.3), x.addcdiv(y, z, value=-2.0), tg.lerp(x, y, 0.2),
               tg.lerp(x, y, 0.9)]
        x.addcmul_(y, z, value=0.3).addcdiv_(y, z, value=-1.5).lerp_(y, 0.35).lerp_(y, 0.6)
        return [t.cpu().numpy() for t in out + [x]]

    for got, want in zip(on(where_), _reference_values(a, b, c)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _reference_values(a, b, c):
    x, y, z = (v.copy() for v in (a, b, c))
    w = np.float32
    out = [x + w(0.3) * (y * z), x + w(-2.0) * (y / z), x + w(0.2) * (y - x),
           y - (y - x) * (w(1) - w(0.9))]
    x = x + w(0.3) * (y * z)
    x = x + w(-1.5) * (y / z)
    x = x + w(0.35) * (y - x)
    x = y - (y - x) * (w(1) - w(0.6))
    return out + [x]


def test_adam_on_every_backend_steps_as_on_numpy(where_):
    w0 = RNG.standard_normal((3, 5)).astype(np.float32)
    grads = [RNG.standard_normal((3, 5)).astype(np.float32) for _ in range(3)]
    w = tg.tensor(w0.copy(), device=where_, requires_grad=True)
    opt = tg.optim.Adam([w], lr=1e-2)
    for g in grads:
        w.grad = tg.tensor(g, device=where_)
        opt.step()
    np.testing.assert_allclose(w.detach().cpu().numpy(), _adam_numpy(w0, grads), rtol=2e-6,
                               atol=1e-7)


# -- the one-pass loops: the same bits as the numpy passes they replace ----------------

from teachgrad.backends import backend_by_name, pointwise_loops  # noqa: E402
from teachgrad.backends.base import Backend  # noqa: E402

# float32 sizes either side of the numpy backend's 64 KB threshold (16384 elements), ragged
LOOP_SIZES = [1, 7, 16383, 16384, 16384 + 13, 3 * 16384 + 5]


def _awkward(n, dtype, seed):
    """Random values with the awkward ones mixed in: ±0, ±inf, nan, subnormals, huge."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).tiny / 8,
                        -np.finfo(dtype).max, 1e-30], dtype)
    if n >= 64:
        x[rng.choice(n, len(special), replace=False)] = special
    return x


def _reference_and_loop(method, n, dtype, *extra):
    """The update done by the base class's numpy calls and by the numpy backend."""
    backend = backend_by_name("numpy")
    x, a, b = (_awkward(n, dtype, seed) for seed in (1, 2, 3))
    want = x.copy()
    with np.errstate(all="ignore"):
        getattr(Backend, method)(backend, want, *((a, b) if method != "lerp_inplace" else (a,)), *extra)
        got = x.copy()
        getattr(backend, method)(got, *((a, b) if method != "lerp_inplace" else (a,)), *extra)
    return want, got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", LOOP_SIZES)
@pytest.mark.parametrize("method, extra", [
    ("addcmul_inplace", (1.0,)), ("addcmul_inplace", (-0.001,)), ("addcdiv_inplace", (1.0,)),
    ("addcdiv_inplace", (-3e-4,)), ("lerp_inplace", (0.1,)), ("lerp_inplace", (0.4999,)),
    ("lerp_inplace", (0.5,)), ("lerp_inplace", (1.0,)), ("lerp_inplace", (-0.75,)),
])
def test_one_pass_loops_give_the_numpy_passes_bits(method, extra, n, dtype):
    value = float(np.dtype(dtype).type(extra[0]))  # (the tensor layer rounds it to the dtype)
    want, got = _reference_and_loop(method, n, dtype, value)
    np.testing.assert_array_equal(got, want)  # (nan where nan: assert_array_equal allows it)
    assert got.tobytes() == want.tobytes() or np.isnan(want).any()  # -0.0 kept as -0.0


def test_large_updates_take_the_one_pass_loop_and_small_ones_do_not(monkeypatch):
    calls = []
    for name in ("addcmul", "addcdiv", "lerp"):
        loop = getattr(pointwise_loops, name)
        monkeypatch.setattr(pointwise_loops, name,
                            lambda *args, _loop=loop, _name=name: (calls.append(_name), _loop(*args)))
    for n, expect in ((16384, ["addcmul", "addcdiv", "lerp"]), (16383, [])):
        calls.clear()
        x, g = tg.ones(n), tg.full((n,), 2.0)
        version = x._version
        x.addcmul_(g, g, value=0.5).addcdiv_(g, g, value=-1.0).lerp_(g, 0.25)
        assert calls == expect
        assert x._version == version + 3  # one bump per update
        np.testing.assert_array_equal(x.numpy(), np.full(n, 2.0 + (2.0 - 2.0) * 0.25, np.float32))
    # the threshold is in bytes: float64 from 8192 elements
    calls.clear()
    for n in (8191, 8192):
        tg.ones(n, dtype=tg.float64).addcmul_(tg.ones(n, dtype=tg.float64), tg.ones(n, dtype=tg.float64))
    assert calls == ["addcmul"]
    # the numba backend uses the loops at every size; integer and strided arrays never
    tg.backends.set_cpu_backend("numba", wait=True)
    try:
        calls.clear()
        tg.ones(3).addcmul_(tg.ones(3), tg.ones(3))
        assert calls == ["addcmul"]
    finally:
        tg.backends.set_cpu_backend("numpy")
    calls.clear()
    counts = tg.ones(20000, dtype=tg.int64)
    counts.addcmul_(counts, counts, value=3)
    assert counts.tolist()[:2] == [4, 4]
    wide = tg.ones(200, 200)
    wide.t().addcmul_(tg.ones(200, 200), tg.ones(200, 200))
    assert calls == []
    np.testing.assert_array_equal(wide.numpy(), np.full((200, 200), 2.0, np.float32))


def test_one_pass_loops_with_operands_that_alias_the_updated_array():
    n = 40000
    base = _awkward(n + 1, np.float32, 5)
    base[~np.isfinite(base)] = 1.0
    g = tg.tensor(_awkward(n, np.float32, 6).clip(-1e3, 1e3))
    # the same array as self, and as both factors: read before written, element by element
    x = tg.tensor(base[:n].copy())
    x.addcmul_(x, g, value=0.5)
    with np.errstate(over="ignore"):  # (-max * 1e3 is -inf in both)
        want = base[:n] + (base[:n] * g.numpy()) * np.float32(0.5)
    np.testing.assert_array_equal(x.numpy(), want)
    y = tg.tensor(base[:n].copy())
    y.addcdiv_(y, y, value=2.0).lerp_(y, 0.3)
    with np.errstate(all="ignore"):
        want = base[:n] + (base[:n] / base[:n]) * np.float32(2)
    np.testing.assert_array_equal(y.numpy(), want)  # lerp toward itself changes nothing
    # overlapping but shifted views (x[i] = x[i] + x[i+1] * g[i]): every read sees the old
    # values, as out of place; the loop is not used (it would read values already written)
    whole = tg.tensor(base.copy())
    with np.errstate(over="ignore"):
        whole[:n].addcmul_(whole[1:], g)
        want = base[:n] + base[1:] * g.numpy()
    np.testing.assert_array_equal(whole.numpy()[:n], want)
    np.testing.assert_array_equal(whole.numpy()[n], base[n])
