"""Differential cases, part 3: the smooth and leaky activations, adaptive pooling, group
norm, and WeightedRandomSampler's refusals (see ``differential_cases.py``).

Activations run over one row of extreme inputs: huge and tiny magnitudes, both sides
of softplus's threshold, the kinks at 0 and NaN. Pooling runs over output sizes that
do not divide the input, ``None`` entries, sizes larger than the input, and an input
of small integers, so that windows hold ties (the first maximum wins, in value, index
and gradient). Layers are also compared by their repr and state_dict names.
"""
from __future__ import annotations

import numpy as np

from differential_cases import CPU_ONLY, CaseList

f32, f64, i64 = np.float32, np.float64, np.int64
rng = np.random.default_rng(2613)

CASES = CaseList()

# -- activations ---------------------------------------------------------------------------------
EDGES = np.array([-1e4, -100., -30., -20.5, -5., -1., -0.5, -1e-8, 0., 1e-8, 0.5, 1., 5.,
                  9.9, 10.5, 19.9, 20.5, 30., 100., 1e4, np.nan], f32)


def _f(name, **kw):
    return lambda C, x: getattr(C.F, name)(x, **kw)


ACTIVATIONS = {
    "gelu": _f("gelu"),
    "gelu_tanh": _f("gelu", approximate="tanh"),
    "silu": _f("silu"),
    "leaky_relu": _f("leaky_relu"),
    "leaky_relu_slope": _f("leaky_relu", negative_slope=0.2),
    "leaky_relu_negative_slope": _f("leaky_relu", negative_slope=-0.5),
    "elu": _f("elu"),
    "elu_alpha": _f("elu", alpha=0.5),
    "softplus": _f("softplus"),
    "softplus_beta_threshold": _f("softplus", beta=2.0, threshold=5.0),
    "softplus_small_beta": _f("softplus", beta=0.5, threshold=1.0),
    "erf": lambda C, x: x.erf(),
    "log1p": lambda C, x: C.T.log1p(x),
    "expm1": lambda C, x: C.T.expm1(x),
}
CASES.table("activation", ACTIVATIONS, (EDGES,), grad=(0,))
CASES.table("activation_f64", {k: ACTIVATIONS[k] for k in (
    "gelu", "gelu_tanh", "silu", "elu", "softplus", "erf")}, (EDGES.astype(f64),), grad=(0,),
    devices=CPU_ONLY)


def _module(make):
    def run(C, x):
        layer = make(C.T.nn)
        return layer(x), repr(layer)
    return run


CASES.table("activation_module", {
    "gelu": _module(lambda nn: nn.GELU()),
    "gelu_tanh": _module(lambda nn: nn.GELU("tanh")),
    "silu": _module(lambda nn: nn.SiLU()),
    "silu_inplace": _module(lambda nn: nn.SiLU(inplace=True)),
    "leaky_relu": _module(lambda nn: nn.LeakyReLU(0.1)),
    "leaky_relu_inplace": _module(lambda nn: nn.LeakyReLU(inplace=True)),
    "elu": _module(lambda nn: nn.ELU(alpha=2.0)),
    "elu_inplace": _module(lambda nn: nn.ELU(0.5, True)),
    "softplus": _module(lambda nn: nn.Softplus(beta=3, threshold=7)),
}, (np.linspace(-4, 4, 9).astype(f32),), devices=CPU_ONLY)


def _in_place_in_graph(name, **kw):
    """``F.<name>(.., inplace=True)`` on a result inside the graph: PyTorch's values and
    gradients (teachgrad returns a new tensor there, see ``nn.inplace.inplace_result``)."""
    return lambda C, x: getattr(C.F, name)(x * 2, inplace=True, **kw) * 3


def _in_place_no_grad(fn):
    def run(C, x):
        y = x.detach().clone()
        out = fn(C, y)
        return out, y  # both hold the result: it was written over y
    return run


CASES.table("activation_inplace", {
    "silu": _in_place_in_graph("silu"),
    "leaky_relu": _in_place_in_graph("leaky_relu", negative_slope=0.3),
    "elu": _in_place_in_graph("elu", alpha=0.7),
    "leaky_relu_underscore": _in_place_no_grad(lambda C, y: C.F.leaky_relu_(y, 0.2)),
    "elu_underscore": _in_place_no_grad(lambda C, y: C.F.elu_(y)),
    "silu_detached": _in_place_no_grad(lambda C, y: C.F.silu(y, inplace=True)),
}, (np.linspace(-3, 3, 7).astype(f32),), grad=(0,), devices=CPU_ONLY)

CASES.table("activation_error", {
    "gelu_bad_approximate": lambda C, x, n: C.F.gelu(x, approximate="exact"),
    "gelu_module_bad_approximate": lambda C, x, n: C.T.nn.GELU("erf")(x),
    "gelu_approximate_positional": lambda C, x, n: C.F.gelu(x, "tanh"),
    "gelu_int": lambda C, x, n: C.F.gelu(n),
    "silu_int": lambda C, x, n: C.F.silu(n),
    "elu_int": lambda C, x, n: C.F.elu(n),
    "leaky_relu_int": lambda C, x, n: C.F.leaky_relu(n),
    "softplus_int": lambda C, x, n: C.F.softplus(n),
    "leaky_relu_inplace_leaf": lambda C, x, n: C.F.leaky_relu(x, inplace=True),
    "elu_inplace_leaf": lambda C, x, n: C.F.elu_(x),
    "silu_not_a_tensor": lambda C, x, n: C.F.silu([1.0, 2.0]),
}, (np.linspace(-1, 1, 4).astype(f32), np.arange(4, dtype=i64)), grad=(0,), devices=CPU_ONLY)

# -- adaptive pooling ----------------------------------------------------------------------------
IMAGE = rng.standard_normal((2, 3, 7, 5)).astype(f32)
TIED = rng.integers(-2, 3, (2, 2, 6, 5)).astype(f32)  # small integers: ties in most windows
WITH_NAN = rng.standard_normal((1, 2, 4, 4)).astype(f32)
WITH_NAN[0, 0, 1, 2] = np.nan
WITH_NAN[0, 1, 3, 0] = np.nan
WITH_INF = rng.standard_normal((1, 2, 5, 4)).astype(f32)
WITH_INF[0, 0, 2, 1], WITH_INF[0, 1, 0, 3] = np.inf, -np.inf

SIZES = {"3": 3, "3x2": (3, 2), "none_3": (None, 3), "4_none": (4, None), "7": 7,
         "1x1": (1, 1), "5x4": (5, 4), "2x9": (2, 9)}


def _avg(size):
    return lambda C, x: C.F.adaptive_avg_pool2d(x, size)


def _max(size):
    return lambda C, x: C.F.adaptive_max_pool2d(x, size, return_indices=True)


CASES.table("adaptive_avg", {k: _avg(v) for k, v in SIZES.items()}, (IMAGE,), grad=(0,),
            devices=CPU_ONLY)
CASES.table("adaptive_max", {k: _max(v) for k, v in SIZES.items()}, (IMAGE,), grad=(0,),
            devices=CPU_ONLY)
CASES.table("adaptive_max_ties", {k: _max(v) for k, v in SIZES.items()}, (TIED,), grad=(0,),
            devices=CPU_ONLY)
CASES.table("adaptive_cuda", {"avg": _avg((2, 3)), "max": _max((4, 2))},
            (IMAGE[:1, :2, :5, :4],), grad=(0,), devices=("cuda",))
CASES.table("adaptive_cuda_ties", {"max": _max((3, 3))}, (TIED[:1, :1, :5, :4],), grad=(0,),
            devices=("cuda",))
CASES.table("adaptive_more", {
    "avg_unbatched": lambda C, x: C.F.adaptive_avg_pool2d(x[0], (2, 3)),
    "max_unbatched": lambda C, x: C.F.adaptive_max_pool2d(x[1], (3, 2), return_indices=True),
    "max_values_only": lambda C, x: C.F.adaptive_max_pool2d(x, (2, 2)),
    "avg_float64": lambda C, x: C.F.adaptive_avg_pool2d(x.double(), (4, 3)),
    "max_float64": lambda C, x: C.F.adaptive_max_pool2d(x.double(), (4, 3)),
    "avg_module": lambda C, x: (C.T.nn.AdaptiveAvgPool2d((None, 2))(x),
                                repr(C.T.nn.AdaptiveAvgPool2d((None, 2)))),
    "max_module": lambda C, x: (C.T.nn.AdaptiveMaxPool2d(2, return_indices=True)(x),
                                repr(C.T.nn.AdaptiveMaxPool2d(2, return_indices=True))),
    "max_module_values": lambda C, x: C.T.nn.AdaptiveMaxPool2d((3, None))(x),
}, (IMAGE,), grad=(0,), devices=CPU_ONLY)
CASES.table("adaptive_empty_output", {  # (PyTorch's backward refuses an empty gradient)
    "avg": lambda C, x: C.F.adaptive_avg_pool2d(x, (0, 2)),
    "max": lambda C, x: C.F.adaptive_max_pool2d(x, 0, return_indices=True),
}, (IMAGE,), devices=CPU_ONLY)
CASES.table("adaptive_nan", {
    "max": lambda C, x: C.F.adaptive_max_pool2d(x, 2),
    "avg": lambda C, x: C.F.adaptive_avg_pool2d(x, 2),
}, (WITH_NAN,), grad=(0,), devices=CPU_ONLY)
CASES.table("adaptive_inf", {  # an infinity stays in its own windows
    "max": lambda C, x: C.F.adaptive_max_pool2d(x, (3, 3), return_indices=True),
    "avg": lambda C, x: C.F.adaptive_avg_pool2d(x, (3, 3)),
}, (WITH_INF,), grad=(0,), devices=CPU_ONLY)
CASES.table("adaptive_error", {
    "avg_one_size": lambda C, x: C.F.adaptive_avg_pool2d(x, (2,)),
    "avg_three_sizes": lambda C, x: C.F.adaptive_avg_pool2d(x, (2, 2, 2)),
    "avg_negative": lambda C, x: C.F.adaptive_avg_pool2d(x, -1),
    "max_negative": lambda C, x: C.F.adaptive_max_pool2d(x, (2, -3)),
    "avg_2d_input": lambda C, x: C.F.adaptive_avg_pool2d(x[0, 0], 2),
    "max_5d_input": lambda C, x: C.F.adaptive_max_pool2d(x[None], 2),
    "avg_empty_input": lambda C, x: C.F.adaptive_avg_pool2d(x[:, :, :0], 2),
    "max_empty_input": lambda C, x: C.F.adaptive_max_pool2d(x[:, :, :, :0], 2),
    "avg_int": lambda C, x: C.F.adaptive_avg_pool2d(x.long(), 2),
    "max_int": lambda C, x: C.F.adaptive_max_pool2d(x.long(), 2),
    "avg_float_size": lambda C, x: C.F.adaptive_avg_pool2d(x, 2.5),
}, (IMAGE,), devices=CPU_ONLY)

# -- group norm ----------------------------------------------------------------------------------
FEATURES = (rng.standard_normal((2, 6, 3, 4)) * 3 + 1).astype(f32)
WEIGHT = rng.standard_normal(6).astype(f32)
BIAS = rng.standard_normal(6).astype(f32)


def _group_norm(groups, **kw):
    return lambda C, x, w, b: C.F.group_norm(x, groups, w, b, **kw)


CASES.table("group_norm", {
    "one_group": _group_norm(1),
    "two_groups": _group_norm(2),
    "three_groups": _group_norm(3, eps=1e-3),
    "six_groups": _group_norm(6),
    "no_affine": lambda C, x, w, b: C.F.group_norm(x, 3),
    "weight_only": lambda C, x, w, b: C.F.group_norm(x, 2, w),
    "2d_input": lambda C, x, w, b: C.F.group_norm(x[:, :, 0, 0], 3, w, b),
    "3d_input": lambda C, x, w, b: C.F.group_norm(x[:, :, 1], 2, w, b),
    "5d_input": lambda C, x, w, b: C.F.group_norm(x.reshape(2, 6, 3, 2, 2), 3, w, b),
    "float64": lambda C, x, w, b: C.F.group_norm(x.double(), 2, w.double(), b.double()),
}, (FEATURES, WEIGHT, BIAS), grad=(0, 1, 2), devices=CPU_ONLY)
CASES.table("group_norm_cuda", {"two_groups": _group_norm(2)},
            (FEATURES[:1, :, :2, :2], WEIGHT, BIAS), grad=(0, 1, 2), devices=("cuda",))


def _group_norm_module(make):
    def run(C, x, w, b):
        layer = make(C.T.nn)
        names = ",".join(layer.state_dict().keys())
        return layer(x), repr(layer), names
    return run


CASES.table("group_norm_module", {
    "default": _group_norm_module(lambda nn: nn.GroupNorm(3, 6)),
    "eps": _group_norm_module(lambda nn: nn.GroupNorm(2, 6, eps=0.1)),
    "no_affine": _group_norm_module(lambda nn: nn.GroupNorm(6, 6, affine=False)),
    "no_bias": _group_norm_module(lambda nn: nn.GroupNorm(1, 6, bias=False)),
}, (FEATURES, WEIGHT, BIAS), grad=(0,), devices=CPU_ONLY)
CASES.table("group_norm_error", {
    "indivisible": lambda C, x, w, b: C.F.group_norm(x, 4),
    "weight_size": lambda C, x, w, b: C.F.group_norm(x, 3, w[:3], b[:3]),
    "1d_input": lambda C, x, w, b: C.F.group_norm(x[0, 0, 0], 1),
    "module_indivisible": lambda C, x, w, b: C.T.nn.GroupNorm(4, 6),
    "module_wrong_channels": lambda C, x, w, b: C.T.nn.GroupNorm(2, 4)(x),
    "dtype_mismatch": lambda C, x, w, b: C.F.group_norm(x.double(), 2, w, b),
}, (FEATURES, WEIGHT, BIAS), devices=CPU_ONLY)

# -- WeightedRandomSampler: what it refuses (its draws are tested by their frequencies) ----------


def _sampler(*args, **kw):
    return lambda C: len(list(C.T.utils.data.WeightedRandomSampler(*args, **kw)))


CASES.table("weighted_sampler", {
    "length": _sampler([0.1, 0.9, 0.4], 5),
    "without_replacement_zero_weight": _sampler([0.0, 1.0, 2.0], 3, replacement=False),
    "negative_weight": _sampler([1.0, -1.0, 2.0], 3),
    "nan_weight": _sampler([1.0, float("nan"), 2.0], 3),
    "inf_weight": _sampler([1.0, float("inf"), 2.0], 3),
    "all_zero": _sampler([0.0, 0.0], 3),
    "empty": _sampler([], 4),
    "too_many_without_replacement": _sampler([1.0, 1.0, 2.0], 4, replacement=False),
    "2d_weights": _sampler([[1.0, 2.0]], 4),
    "scalar_weights": _sampler(5.0, 2),
    "zero_samples": _sampler([1.0, 2.0], 0),
    "float_samples": _sampler([1.0, 2.0], 2.0),
    "int_replacement": _sampler([1.0, 2.0], 2, replacement=1),
}, devices=("cpu",))
