"""Fused kernels compute what eager teachgrad computes, special values included, and their
source holds only names the generator made.

Every fusible operation runs fused (after ``x * 1.0``, which changes no value, so that two
operations make a region) on a grid of special values (NaN, ±inf, ±0, huge, tiny,
subnormal), in float32 and float64, on cpu and on cuda (numba's simulator), and is
compared with the same function run eagerly on the same device.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.jit import passes
from teachgrad.jit.codegen import TEMPLATES, make_fused_function
from teachgrad.jit.ir import Node, Ref, TensorMeta
from teachgrad.ops import elementwise as ew

DEVICES = ["cpu", "cuda"]
DTYPES = ["float32", "float64"]


def specials(dtype: str, few: bool = False) -> np.ndarray:
    """NaN, ±inf, ±0, ordinary numbers, the largest, the smallest normal and a subnormal."""
    info = np.finfo(dtype)
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 20.0, -20.0,
              88.5, -100.0, 1e30, -1e30, float(info.max), float(info.tiny), float(info.smallest_subnormal)]
    if few:  # the simulator runs one Python thread per element: fewer pairs
        values = values[:9] + [-20.0, float(info.max), float(info.smallest_subnormal)]
    return np.array(values, dtype=dtype)


def tolerance(dtype: str) -> dict:
    # float32: numpy's SIMD transcendentals and the C library's differ by an ulp or two, and
    # the fused float32 tanh is a rational function within 4e-7 of numpy's (hence atol)
    return dict(rtol=4e-6, atol=5e-7) if dtype == "float32" else dict(rtol=1e-13, atol=0)


def assert_same(got: np.ndarray, want: np.ndarray, dtype: str, what: str) -> None:
    """NaN where eager has NaN, the same infinities, the same sign of zero, close elsewhere."""
    assert got.dtype == want.dtype == np.dtype(dtype), what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN positions: {what}")
    np.testing.assert_array_equal(np.isinf(got) * np.sign(got), np.isinf(want) * np.sign(want),
                                  err_msg=f"infinities: {what}")
    zeros = (got == 0) & (want == 0)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                  err_msg=f"sign of zero: {what}")
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], **tolerance(dtype), err_msg=what)


UNARY = {cls: fn for cls, fn in {
    ew.Neg: lambda a: -a, ew.Abs: lambda a: a.abs(), ew.Exp: lambda a: a.exp(),
    ew.Log: lambda a: a.log(), ew.Sqrt: lambda a: a.sqrt(), ew.Sin: lambda a: a.sin(),
    ew.Cos: lambda a: a.cos(), ew.Tanh: lambda a: a.tanh(), ew.Sigmoid: lambda a: a.sigmoid(),
    ew.Relu: lambda a: a.relu()}.items()}
BINARY = {ew.Add: lambda a, b: a + b, ew.Sub: lambda a, b: a - b, ew.Mul: lambda a, b: a * b,
          ew.Div: lambda a, b: a / b, ew.Pow: lambda a, b: a ** b}


def test_every_template_is_covered():
    assert set(UNARY) | set(BINARY) == set(TEMPLATES)


def run_both(fn, arrays: list[np.ndarray], device: str, regions: int | None = 1) -> tuple:
    """``fn`` compiled and eager on the same inputs; also their gradients (ones in). The
    compiled function must make ``regions`` fused regions (None: any number).

    Fusion (after dead code) is the only pass: common-subexpression elimination, for one,
    merges two ``x * y`` nodes into one, and at ``x = -inf`` the merged gradient
    ``(1 + 0) * x`` is -inf where eager's two nodes give ``1 * x + 0 * x``, NaN."""
    results = []
    for run in (tg.compile(fn, passes=[passes.eliminate_dead_code, passes.fuse_elementwise]), fn):
        xs = [tg.tensor(a, device=device, requires_grad=True) for a in arrays]
        with tg.no_grad():
            value = run(*xs)
        out = run(*xs)
        out.backward(tg.ones(out.shape, dtype=out.dtype, device=device))
        results.append((value.cpu().numpy(), out.detach().cpu().numpy(), [x.grad.cpu().numpy() for x in xs]))
        if run is not fn and regions is not None:
            assert len(run.kernels) == regions, "the function should have made one fused region"
    return results[0], results[1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(UNARY), ids=lambda c: c.__name__)
def test_fused_unary_ops_follow_eager_on_special_values(op, dtype, device):
    x = specials(dtype)
    (fast, fast_grad_mode, fast_grads), (slow, slow_grad_mode, slow_grads) = run_both(
        lambda a: UNARY[op](a * 1.0), [x], device)
    what = f"{op.__name__} {dtype} {device}"
    assert_same(fast, slow, dtype, what)
    assert_same(fast_grad_mode, slow, dtype, what + " (with gradients on)")
    assert_same(fast_grads[0], slow_grads[0], dtype, what + " gradient")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(BINARY), ids=lambda c: c.__name__)
def test_fused_binary_ops_follow_eager_on_pairs_of_special_values(op, dtype, device):
    values = specials(dtype, few=device == "cuda")
    a, b = np.repeat(values, values.size), np.tile(values, values.size)
    (fast, fast_grad_mode, fast_grads), (slow, _, slow_grads) = run_both(
        lambda x, y: BINARY[op](x * 1.0, y), [a, b], device)
    what = f"{op.__name__} {dtype} {device}"
    assert_same(fast, slow, dtype, what)
    assert_same(fast_grad_mode, slow, dtype, what + " (with gradients on)")
    for i in range(2):
        assert_same(fast_grads[i], slow_grads[i], dtype, what + f" gradient of operand {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_numbers_on_either_side_and_non_finite_constants(dtype, device):
    def f(x):
        return (2.0 - x) * (3.0 / (x * 1.0 + 0.5)) + x ** 2.0 - (x * math.inf).sigmoid()
    x = specials(dtype, few=device == "cuda")
    (fast, _, fast_grads), (slow, _, slow_grads) = run_both(f, [x], device, regions=3)
    assert_same(fast, slow, dtype, "numbers as operands")
    assert_same(fast_grads[0], slow_grads[0], dtype, "numbers as operands, gradient")


def test_signed_zero_and_nan_constants_stay_apart():
    def f(x):
        a = x * 1.0  # one region with three outputs
        return a * 0.0, a * -0.0, a * math.nan - 1.0
    x = tg.tensor([1.0, -2.0, 0.0])
    compiled = tg.compile(f)
    for got, want in zip(compiled(x), f(x)):
        assert_same(got.numpy(), want.numpy(), "float32", "constants 0.0, -0.0 and nan")
    source = compiled.kernels[0].source
    assert "np.float32(0.0)" in source and "np.float32(-0.0)" in source and "np.float32(math.nan)" in source


@pytest.mark.parametrize("device", DEVICES)
def test_the_reported_float32_cases(device):
    """relu, tanh and sigmoid keep NaN; log(sigmoid(-20)) is -20 (PyTorch: -20.0 too)."""
    x = tg.tensor([math.nan, -20.0, -0.0], device=device)
    got = tg.compile(lambda x: ((x * 1.0).relu(), (x * 1.0).tanh(), (x * 1.0).sigmoid(),
                                (x * 1.0).sigmoid().log()))(x)
    relu, tanh, sigmoid, log_sigmoid = [t.cpu().numpy() for t in got]
    assert np.isnan(relu[0]) and np.isnan(tanh[0]) and np.isnan(sigmoid[0])
    assert log_sigmoid[1] == pytest.approx(-20.0, rel=1e-6)
    assert relu[2] == 0 and not np.signbit(relu[2])  # max(-0, 0) is +0, as numpy's maximum
    assert np.signbit(tanh[2])  # tanh(-0) is -0


def test_cuda_kernels_call_eagers_scalar_functions():
    compiled = tg.compile(lambda x: (x * 2.0).tanh().sigmoid().relu())
    compiled(tg.randn(5, device="cuda"))
    source = compiled.kernels[0].source
    assert "from teachgrad.kernels import ops as scalar" in source
    assert "scalar.tanh(" in source and "scalar.sigmoid(" in source and "scalar.relu(" in source
    assert "v0 = np.float32(x0 * c0)" in source  # each value rounded where eager's array would round


# -- generated names only ------------------------------------------------------------------

HOSTILE = ["__import__('os').system('echo owned')", "x; import os", "c0", "in0", "v1", "math",
           "np", "i", "zero", "MARKER_MARKER", "é", "0.weight", "a\nb"]


def hostile_region(dtype: str, device: str) -> list:
    """Members, inputs and outputs of a chain whose every node has a hostile name."""
    meta = TensorMeta((4,), dtype, device)
    names = [f"{h}_MARKER" for h in HOSTILE]
    x, y = Ref(names[0]), Ref(names[1])
    members, previous = [], x
    for k, op in enumerate([ew.Mul, ew.Add, ew.Tanh, ew.Sigmoid, ew.Relu, ew.Pow, ew.Div]):
        args = (previous, y) if op in (ew.Add, ew.Pow, ew.Div) else (previous,)
        if op is ew.Mul:
            args = (previous, 2.0)
        members.append(Node(names[k + 2], "call_function", op, args, {}, (meta,)))
        previous = Ref(names[k + 2])
    return members, [x, y], [members[-1].name, members[3].name]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_generated_source_never_contains_node_names(dtype, device):
    members, inputs, outputs = hostile_region(dtype, device)
    fused = make_fused_function(members, inputs, outputs)
    for text in (fused.source, fused.backward_source, fused.__name__, fused.rule):
        assert "MARKER" not in text and "os" not in text.replace("cos", "").split()
        assert "import os" not in text and "system" not in text and "é" not in text
    assert fused.__name__ == "fused_mul_add_tanh"
    assert "mul -> add -> tanh -> sigmoid -> relu -> pow -> div" in fused.source


def test_hostile_names_still_compute_the_region():
    members, inputs, outputs = hostile_region("float64", "cpu")
    fused = make_fused_function(members, inputs, outputs)
    x = tg.tensor([0.5, 1.0, 2.0, 3.0], dtype=tg.float64, requires_grad=True)
    y = tg.tensor([1.5, 2.0, 0.5, 1.0], dtype=tg.float64, requires_grad=True)
    got = fused.apply(x, y)
    want = fused.run_eager(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-13)
    assert tg.autograd.gradcheck(lambda a, b: fused.apply(a, b), (x, y))


def test_a_subclass_of_a_fusible_op_is_not_fused():
    class Mul(ew.Mul):  # same name, not teachgrad's class: not in the table, never fused
        pass
    compiled = tg.compile(lambda x: Mul.apply(Mul.apply(x, 2.0), 3.0).tanh())
    compiled(tg.randn(4))
    assert compiled.kernels == []


def test_eager_cuda_sin_and_cos_of_infinity_are_nan_as_in_numpy():
    x = tg.tensor([math.inf, -math.inf, 1.0], device="cuda")
    for name in ("sin", "cos"):
        got = getattr(x, name)().cpu().numpy()
        np.testing.assert_array_equal(np.isnan(got), [True, True, False])


# -- random programs ------------------------------------------------------------------------

STEPS = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / (b * b + 1.0),
         lambda a, b: a.tanh(), lambda a, b: a.sigmoid(), lambda a, b: a.relu(), lambda a, b: -a,
         lambda a, b: (a * 0.5).exp(), lambda a, b: (a * a + 1.0).log(), lambda a, b: a.abs(),
         lambda a, b: (a.abs() + 0.25).sqrt(), lambda a, b: a.sin(), lambda a, b: a.cos(),
         lambda a, b: (a * a + 0.5) ** b.tanh(), lambda a, b: 2.0 - a, lambda a, b: a * 3.0]


def random_program(seed: int):
    """A chain of 4-8 random elementwise steps over two inputs, each step reading two
    earlier values (so values are shared and gradients add up)."""
    rng = np.random.default_rng(seed)
    plan = [(int(rng.integers(len(STEPS))), int(rng.integers(k + 2)), int(rng.integers(k + 2)))
            for k in range(int(rng.integers(4, 9)))]

    def program(x, y):
        values = [x, y]
        for step, i, j in plan:
            values.append(STEPS[step](values[i], values[j]))
        return values[-1] * 1.0 + values[2] + x * y  # (x and y both reach the result)
    return program


RANDOM_CASES = [(seed, dtype, "cpu") for seed in range(12) for dtype in DTYPES] + \
    [(seed, "float32", "cuda") for seed in range(3)]


@pytest.mark.parametrize("seed, dtype, device", RANDOM_CASES)
def test_random_programs_match_eager_with_their_gradients(seed, dtype, device):
    rng = np.random.default_rng(100 + seed)
    n = 40 if device == "cpu" else 5
    x = np.concatenate([rng.standard_normal(n), [math.nan, math.inf, -math.inf, 0.0, -0.0]]).astype(dtype)
    y = np.concatenate([rng.standard_normal(n), [1.0, -0.0, 2.0, math.inf, math.nan]]).astype(dtype)
    program = random_program(seed)
    (fast, fast_grad_mode, fast_grads), (slow, _, slow_grads) = run_both(program, [x, y], device,
                                                                          regions=None)
    tol = dict(rtol=2e-5, atol=4e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)
    for got, want, what in [(fast, slow, "value"), (fast_grad_mode, slow, "value, gradients on"),
                            (fast_grads[0], slow_grads[0], "gradient of x"),
                            (fast_grads[1], slow_grads[1], "gradient of y")]:
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"NaN positions: {what}")
        np.testing.assert_allclose(got, want, equal_nan=True, **tol, err_msg=what)


def test_an_input_that_feeds_only_dead_code_gets_no_gradient():
    """Without dead-code elimination a region may hold unused members; an input read only
    by them gets no gradient (None, as eager leaves it), not zeros: a zero gradient sent
    upstream would meet an infinity there and make NaN where eager has none."""
    program = random_program(7)  # (a region whose second input feeds only dead members)
    x, y = np.array([math.inf, 1.5]), np.array([-0.0, 0.5])
    (fast, _, fast_grads), (slow, _, slow_grads) = run_both(program, [x, y], "cpu", regions=None)
    fused_only = tg.compile(program, passes=[passes.fuse_elementwise])
    fused_only(tg.tensor(x), tg.tensor(y))
    assert any("grad_in1" not in k.backward_source and "in1" in k.source for k in fused_only.kernels)
    xs = [tg.tensor(a, requires_grad=True) for a in (x, y)]
    fused_only(*xs).backward(tg.ones(2, dtype=tg.float64))
    for got, want in zip(xs, slow_grads):
        np.testing.assert_array_equal(got.grad.numpy(), want)
