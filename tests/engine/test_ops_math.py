"""Statistics, norms, einsum, counting and sampling: gradients, errors, distributions.

Values and gradients against PyTorch are in the differential suite
(``scripts/differential_ops_math.py``); here: float64 gradchecks of every
differentiable op, the messages of bad input, the AttributeError for PyTorch names
teachgrad lacks, and the distributions of the random functions (chi-square and
Kolmogorov-Smirnov statistics with fixed seeds, against their 0.1% critical values).
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import gradcheck

rng = np.random.default_rng(7)


def leaf(*shape: int) -> tg.Tensor:
    return tg.tensor(rng.standard_normal(shape), dtype=tg.float64, requires_grad=True)


def raises(kind: type, text: str):
    return pytest.raises(kind, match=re.escape(text))


# -- float64 gradchecks -------------------------------------------------------------------------

ONE_INPUT = {
    "var": lambda x: x.var(),
    "var_dim_correction0": lambda x: tg.var(x, 1, correction=0),
    "var_dims_keepdim": lambda x: x.var((0, 2), keepdim=True),
    "std": lambda x: x.std(),
    "std_dim_unbiased_false": lambda x: x.std(-1, False),
    "std_correction2": lambda x: x.std(dim=1, correction=2, keepdim=True),
    "logsumexp": lambda x: x.logsumexp(1),
    "logsumexp_dims": lambda x: tg.logsumexp(x * 30, (0, 2), keepdim=True),
    "norm": lambda x: x.norm(),
    "norm_p1_dim": lambda x: x.norm(1, dim=2),
    "norm_inf_dim": lambda x: x.norm(float("inf"), dim=1),
    "norm_neg_inf": lambda x: x.norm(float("-inf"), dim=(0, 1)),
    "norm_p3": lambda x: tg.norm(x, 3, dim=0),
    "norm_p_half": lambda x: x.norm(0.5, dim=-1),
    "norm_p_one_and_half": lambda x: x.norm(1.5, dim=-1, keepdim=True),
    "matrix_norm_fro": lambda x: tg.linalg.matrix_norm(x),
    "matrix_norm_1": lambda x: tg.linalg.matrix_norm(x, 1),
    "matrix_norm_neg_inf": lambda x: tg.linalg.matrix_norm(x, -math.inf, dim=(0, 2)),
    "linalg_norm": lambda x: tg.linalg.norm(x[0], math.inf),
    "mode": lambda x: (x * 0 + x[:1]).mode(0).values,
    "einsum_trace": lambda x: tg.einsum("ii", x[0, :, :3]),
    "einsum_diagonal_batch": lambda x: tg.einsum("bii->bi", x[:, :, :3]),
    "einsum_ellipsis": lambda x: tg.einsum("...ij->...ji", x),
    "einsum_sum": lambda x: tg.einsum("ijk->j", x),
}


@pytest.mark.parametrize("name", list(ONE_INPUT))
def test_gradcheck_one_input(name):
    assert gradcheck(ONE_INPUT[name], (leaf(2, 3, 4),))


TWO_INPUTS = {
    "cdist": (lambda a, b: tg.cdist(a, b), (3, 4), (5, 4)),
    "cdist_p1": (lambda a, b: tg.cdist(a, b, 1.0), (3, 4), (5, 4)),
    "cdist_p3_batched": (lambda a, b: tg.cdist(a, b, 3), (2, 3, 4), (1, 5, 4)),
    "cdist_inf": (lambda a, b: tg.cdist(a, b, float("inf")), (3, 2), (2, 2)),
    "einsum_matmul": (lambda a, b: tg.einsum("ij,jk->ik", a, b), (2, 3), (3, 4)),
    "einsum_batched": (lambda a, b: tg.einsum("bij,bkj->bik", a, b), (2, 3, 4), (2, 5, 4)),
    "einsum_broadcast": (lambda a, b: tg.einsum("...ij,...jk", a, b), (2, 3, 4), (1, 4, 2)),
    "einsum_size_one": (lambda a, b: tg.einsum("ij,ij->j", a, b), (3, 4), (1, 4)),
    "einsum_outer": (lambda a, b: tg.einsum("i,j", a, b), (3,), (2,)),
}


@pytest.mark.parametrize("name", list(TWO_INPUTS))
def test_gradcheck_two_inputs(name):
    fn, shape_a, shape_b = TWO_INPUTS[name]
    assert gradcheck(fn, (leaf(*shape_a), leaf(*shape_b)))


def test_einsum_three_operands_gradcheck():
    assert gradcheck(lambda a, b, c: tg.einsum("ij,jk,kl->li", a, b, c),
                     (leaf(2, 3), leaf(3, 4), leaf(4, 2)))


def _random_equation(draw: np.random.Generator) -> tuple[str, list[np.ndarray]]:
    """Two or three operands over the letters ijkl (sizes 2..4), some repeated within
    an operand (diagonals), some shared, an explicit or an implicit output."""
    sizes = dict(zip("ijkl", draw.integers(2, 5, 4)))
    terms = ["".join(draw.choice(list("ijkl"), draw.integers(1, 4)))
             for _ in range(draw.integers(2, 4))]
    used = sorted(set("".join(terms)))
    output = "".join(draw.permutation(used)[:draw.integers(0, len(used) + 1)])
    equation = ",".join(terms) + ("" if draw.random() < 0.3 else "->" + output)
    return equation, [draw.standard_normal([sizes[c] for c in t]) for t in terms]


def test_einsum_agrees_with_numpy_on_random_equations():
    draw = np.random.default_rng(0)
    for _ in range(60):
        equation, arrays = _random_equation(draw)
        got = tg.einsum(equation, *[tg.tensor(a) for a in arrays]).numpy()
        np.testing.assert_allclose(got, np.einsum(equation, *arrays), atol=1e-12,
                                   err_msg=equation)


def test_gradients_where_there_is_no_derivative_are_pytorchs():
    zero = tg.zeros(3, dtype=tg.float64, requires_grad=True)
    zero.norm().backward()  # x / ||x|| at 0: 0, not nan
    constant = tg.ones(2, 3, dtype=tg.float64, requires_grad=True)
    constant.std(1).sum().backward()  # (x - mean) / std at std = 0: 0
    ties = tg.tensor([2., -2., 1.], dtype=tg.float64, requires_grad=True)
    ties.norm(float("inf")).backward()  # the two largest |x| share the gradient
    assert zero.grad.tolist() == [0., 0., 0.]
    assert constant.grad.tolist() == [[0.] * 3] * 2
    assert ties.grad.tolist() == [0.5, -0.5, 0.]


def test_no_degrees_of_freedom_give_nan_and_a_warning_not_an_exception():
    x = tg.tensor([2.5], requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        v = x.var()
    v.backward()
    assert math.isnan(v.item()) and math.isnan(x.grad.item())


def test_logsumexp_is_stable_with_infinities():
    x = tg.tensor([[-math.inf, -math.inf], [math.inf, 1.], [1000., 1000.]])
    assert x.logsumexp(1).tolist() == [-math.inf, math.inf, pytest.approx(1000 + math.log(2))]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_device_gives_the_same_values(device):
    x = tg.tensor(rng.standard_normal((3, 4)), device=device)
    y = tg.tensor(rng.standard_normal((2, 4)), device=device)
    host = x.cpu().numpy()
    np.testing.assert_allclose(x.std(1).cpu().numpy(), host.std(1, ddof=1))
    np.testing.assert_allclose(tg.cdist(x, y).cpu().numpy(),
                               np.linalg.norm(host[:, None] - y.cpu().numpy()[None], axis=-1))
    np.testing.assert_allclose(tg.einsum("ij,kj->ik", x, y).cpu().numpy(), host @ y.cpu().numpy().T)
    assert x.norm(dim=1).device == x.device and tg.unique(x.long()).device == x.device


# -- bad input: PyTorch's error class, a message that names the fix --------------------------------

ERRORS = [
    (lambda: tg.tensor([1, 2]).var(), RuntimeError, "std and var only support floating point"),
    (lambda: tg.ones(3).var(unbiased=True, correction=0), TypeError,
     "pass either unbiased= or correction=, not both"),
    (lambda: tg.ones(3).norm(p="nuc"), RuntimeError, "must have at least 2 dimensions"),
    (lambda: tg.linalg.matrix_norm(tg.ones(2, 2, dtype=tg.float16), "nuc"), RuntimeError,
     "Low precision dtypes not supported"),
    (lambda: tg.linalg.vector_norm(tg.ones(2), "fro"), TypeError, "ord must be a number"),
    (lambda: tg.cdist(tg.ones(2, 3), tg.ones(2, 3, dtype=tg.float64)), RuntimeError,
     "must have the same dtype"),
    (lambda: tg.einsum(tg.ones(2), [0]), TypeError, "the first argument must be the equation"),
    (lambda: tg.einsum("ij,jk", tg.ones(2, 3), tg.ones(4, 5)), RuntimeError,
     "subscript j has size 3 and size 4"),
    (lambda: tg.einsum("i...i...", tg.ones(2, 2)), RuntimeError, "more than one ellipsis"),
    (lambda: tg.bincount(tg.tensor([1, -1])), RuntimeError, "holds -1. Fix: shift the values"),
    (lambda: tg.bincount(tg.tensor([1.0])), NotImplementedError, "Fix: convert with .long()"),
    (lambda: tg.nn.functional.one_hot(tg.tensor([1, 5]), 3), RuntimeError,
     "smaller than num_classes (3), found 5"),
    (lambda: tg.isclose(tg.ones(2), tg.ones(2, dtype=tg.float64)), RuntimeError,
     "Fix: convert one, e.g. other.to(teachgrad.float32)"),
    (lambda: tg.mode(tg.ones(2, 0)), IndexError, "Expected reduction dim 1 to have non-zero size"),
    (lambda: tg.multinomial(tg.tensor([0.5, 0.5]), 3), RuntimeError, "Fix: replacement=True"),
    (lambda: tg.multinomial(tg.tensor([0.5, 0.5]), 1.5), TypeError, "'num_samples' must be an int"),
    (lambda: tg.bernoulli(tg.tensor([1, 0])), RuntimeError, "Fix: convert with .float()"),
    (lambda: tg.zeros(2).bernoulli_(tg.tensor([0.5, -0.1])), RuntimeError, "Fix: clamp them"),
    (lambda: tg.zeros(2).normal_(0, -1), RuntimeError, "normal expects std >= 0.0"),
    (lambda: tg.zeros(2).uniform_(0, "1"), TypeError, "argument 'to' must be a number"),
    (lambda: tg.randint(0, 5, 3), TypeError, "argument 'size' must be a tuple of ints"),
    (lambda: tg.randint(0.5, 5, (3,)), TypeError, "argument 'low' must be an int"),
    (lambda: tg.randperm(2.0), TypeError, "argument 'n' must be an int"),
    (lambda: tg.inference_mode("yes"), TypeError, "inference_mode(mode) takes a bool"),
    (lambda: f"{tg.ones(2):.3f}", TypeError, 'Fix: format one number, e.g. f"{t.item():.3f}"'),
]


@pytest.mark.parametrize("call, kind, text", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_bad_input_is_refused_with_a_clear_error(call, kind, text):
    with raises(kind, text):
        call()


def test_a_refused_sampling_call_draws_nothing():
    tg.manual_seed(3)
    with pytest.raises(RuntimeError):
        tg.multinomial(tg.tensor([1.0, -1.0]), 1)
    after_refusal = tg.rand(3).tolist()
    tg.manual_seed(3)
    assert tg.rand(3).tolist() == after_refusal


# -- PyTorch names teachgrad does not have ---------------------------------------------------------

WHERE = 'What teachgrad covers is listed in its README, section "What of PyTorch is covered".'


@pytest.mark.parametrize("get, shown", [
    (lambda: tg.fft, "torch.fft (tg.fft)"),
    (lambda: tg.nn.Transformer, "torch.nn.Transformer (tg.nn.Transformer)"),
    (lambda: tg.nn.functional.ctc_loss, "torch.nn.functional.ctc_loss (tg.nn.functional.ctc_loss)"),
    (lambda: tg.linalg.svd, "torch.linalg.svd (tg.linalg.svd)"),
    (lambda: tg.ones(2).stft, "torch.Tensor.stft (Tensor.stft)"),
    (lambda: tg.nn.Parameter(tg.ones(2)).stft, "torch.Tensor.stft (Tensor.stft)"),
])
def test_a_pytorch_name_teachgrad_lacks_says_so(get, shown):
    with raises(AttributeError, f"teachgrad does not implement {shown}. {WHERE}"):
        get()


@pytest.mark.parametrize("get, message", [
    (lambda: tg.no_such_thing, "module 'teachgrad' has no attribute 'no_such_thing'"),
    (lambda: tg.nn.Linearr, "module 'teachgrad.nn' has no attribute 'Linearr'"),
    (lambda: tg.ones(2).no_such_method, "'Tensor' object has no attribute 'no_such_method'"),
])
def test_a_name_pytorch_lacks_too_gets_pythons_message(get, message):
    with raises(AttributeError, message):
        get()


def test_missing_methods_stay_out_of_the_way():
    t, p = tg.ones(2), tg.nn.Parameter(tg.ones(2))
    assert not hasattr(t, "stft") and "stft" not in dir(t) and "std" in dir(t)
    p.stft = "a user's own attribute"  # a Parameter's own attributes still win
    assert p.stft == "a user's own attribute"
    assert tg.nn.Linear is not None and tg.nn.functional.one_hot is not None


# -- format specs and inference mode -------------------------------------------------------------

def test_format_spec_on_a_0d_tensor_formats_its_number():
    loss = (tg.tensor([1.5, 2.25], requires_grad=True) ** 2).sum()
    assert f"{loss:.4f}" == "7.3125" and f"{tg.tensor(7):03d}" == "007"
    assert f"{tg.ones(2)}" == str(tg.ones(2))


def test_inference_mode_as_block_decorator_and_switch():
    x = tg.ones(2, requires_grad=True)

    @tg.inference_mode
    def bare():
        return x * 2, tg.is_inference_mode_enabled()

    @tg.inference_mode()
    def called():
        return x * 2

    with tg.inference_mode():
        inside = x * 2
        with tg.inference_mode(False):
            switched_off = x * 2
    assert not inside.requires_grad and switched_off.requires_grad
    assert bare()[0].requires_grad is False and bare()[1] is True
    assert not called().requires_grad
    assert tg.is_grad_enabled() and not tg.is_inference_mode_enabled()


# -- distributions of the random functions --------------------------------------------------------

Z_999 = 3.0902  # the standard normal's 99.9% quantile


def chi_square_critical(df: int) -> float:
    """The 99.9% quantile of chi-square(df) (Wilson-Hilferty, within 1% for df >= 2)."""
    return df * (1 - 2 / (9 * df) + Z_999 * math.sqrt(2 / (9 * df))) ** 3


def assert_frequencies(counts: np.ndarray, probabilities: np.ndarray) -> None:
    expected = counts.sum() * probabilities / probabilities.sum()
    statistic = ((counts - expected) ** 2 / expected).sum()
    assert statistic < chi_square_critical(len(counts) - 1), (counts, expected)


def assert_distribution(samples: np.ndarray, cdf) -> None:
    """Kolmogorov-Smirnov: the largest gap between the empirical and the true CDF."""
    x = np.sort(samples)
    n = len(x)
    true = np.array([cdf(v) for v in x])
    gap = max(np.max(np.arange(1, n + 1) / n - true), np.max(true - np.arange(n) / n))
    assert gap < 1.949 / math.sqrt(n), gap  # the 0.1% critical value


def test_multinomial_with_replacement_follows_the_weights():
    tg.manual_seed(0)
    weights = np.array([1., 0., 2., 5.])
    drawn = tg.multinomial(tg.tensor(weights), 4000, replacement=True).numpy()
    counts = np.bincount(drawn, minlength=4)
    assert counts[1] == 0
    assert_frequencies(counts[[0, 2, 3]], weights[[0, 2, 3]])


def test_multinomial_without_replacement_draws_each_once_in_proportion():
    g = tg.Generator().manual_seed(1)
    weights = tg.tensor([[1., 2., 3., 4.]] * 3000)
    drawn = tg.multinomial(weights, 4, generator=g).numpy()
    assert all(sorted(row) == [0, 1, 2, 3] for row in drawn)
    assert_frequencies(np.bincount(drawn[:, 0], minlength=4), np.array([1., 2., 3., 4.]))
    # the second draw: P(j second) = sum over i != j of p_i * p_j / (1 - p_i)
    p = np.array([.1, .2, .3, .4])
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    assert_frequencies(np.bincount(drawn[:, 1], minlength=4), second)


def test_randint_randperm_bernoulli_are_uniform_and_fair():
    tg.manual_seed(2)
    assert_frequencies(np.bincount(tg.randint(3, 9, (6000,)).numpy() - 3), np.ones(6))
    first = np.array([tg.randperm(5)[0].item() for _ in range(1500)])
    assert_frequencies(np.bincount(first, minlength=5), np.ones(5))
    p = tg.tensor([0.1, 0.5, 0.9]).expand(4000, 3).contiguous()
    ones = tg.bernoulli(p).numpy().sum(0)
    for k, q in enumerate([0.1, 0.5, 0.9]):
        assert_frequencies(np.array([ones[k], 4000 - ones[k]]), np.array([q, 1 - q]))


def test_normal_and_uniform_fill_with_their_distributions():
    g = tg.Generator().manual_seed(4)
    normal = tg.empty(3000, dtype=tg.float64).normal_(2.0, 0.5, generator=g).numpy()
    uniform = tg.empty(3000).uniform_(-1.0, 3.0, generator=g).numpy()
    assert_distribution(normal, lambda v: 0.5 * (1 + math.erf((v - 2.0) / (0.5 * math.sqrt(2)))))
    assert_distribution(uniform, lambda v: (v + 1.0) / 4.0)
    assert uniform.dtype == np.float32


@pytest.mark.parametrize("draw", [
    lambda g: tg.rand(5, generator=g), lambda g: tg.randn(5, generator=g),
    lambda g: tg.randint(0, 100, (5,), generator=g), lambda g: tg.randperm(8, generator=g),
    lambda g: tg.multinomial(tg.ones(6), 3, generator=g),
    lambda g: tg.bernoulli(tg.full((8,), 0.5), generator=g),
    lambda g: tg.empty(5).normal_(generator=g), lambda g: tg.empty(5).uniform_(generator=g),
])
def test_a_generator_gives_its_own_reproducible_stream(draw):
    tg.manual_seed(0)
    first = draw(tg.Generator().manual_seed(11)).tolist()
    tg.rand(3)  # the global stream moving on changes nothing
    assert draw(tg.Generator().manual_seed(11)).tolist() == first
    tg.manual_seed(5)
    before = tg.rand(2).tolist()
    tg.manual_seed(5)
    draw(tg.Generator().manual_seed(11))
    assert tg.rand(2).tolist() == before  # and it leaves the global stream alone


# -- value-dependent operations inside a traced function ---------------------------------------

@pytest.mark.parametrize("fn", [lambda x: tg.unique(x), lambda x: x.nonzero(),
                                lambda x: tg.bincount(x), lambda x: tg.nn.functional.one_hot(x)])
def test_a_traced_function_refuses_a_value_dependent_result_instead_of_baking_it(fn):
    from teachgrad.jit.tracer import TracingError
    with raises(TracingError, "graph break: .numpy() was called"):
        tg.jit.trace(fn, (tg.tensor([1, 2, 2, 3]),))


def test_statistics_and_einsum_compile_and_follow_new_inputs():
    def f(t):
        return t.mode(0).values + t.std() + tg.einsum("i,i", t, t) + t.logsumexp(0) + t.norm(1)
    compiled = tg.compile(f)
    for values in ([1., 2., 2.], [3., 3., 1.], [0.5, -4., 0.5]):
        t = tg.tensor(values, dtype=tg.float64)
        assert compiled(t).item() == pytest.approx(f(t).item())


def test_bitwise_operators_on_integers_are_refused_with_the_logical_alternative():
    with pytest.raises(TypeError, match=r"& between bool tensors.*tg.logical_and"):
        tg.tensor([1, 2]) & tg.tensor([1, 0])
    with pytest.raises(TypeError, match=r"~ on bool tensors.*tg.logical_not"):
        ~tg.tensor([1.0])
    assert (tg.tensor([True]) & tg.tensor([False])).dtype == tg.bool
