"""teachgrad: a small, real deep-learning framework to read, run and watch.

    import teachgrad as tg
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.grad                      # tensor([2., 4., 6.])

The API follows PyTorch's names and semantics; where teachgrad differs, its
error messages say so.
"""
# Decide GPU or CUDA simulator before anything imports numba.
from . import _cuda_setup  # noqa: F401  (isort: skip)
# The Tensor class, then the operations, then the methods they give it (imports point down).
from . import tensor_methods  # noqa: F401,E402  (isort: skip)

from . import autograd, backends, dtypes, graph  # noqa: E402
from .autograd import (  # noqa: E402
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .creation import (  # noqa: E402
    arange, as_tensor, empty, eye, from_numpy, full, full_like, linspace, ones, ones_like,
    rand, randint, randn, randperm, zeros, zeros_like,
)
from .device import Device as device  # noqa: E402
from .dtypes import (  # noqa: E402
    bfloat16, bool_ as bool, float16, float32, float64, get_default_dtype, int64, promote_types,
    result_type, set_default_dtype,
)
from .ops.functional import (  # noqa: E402
    abs, add, addcdiv, addcmul, all, amax, amin, any, argmax, argmin, bmm, cat, clamp, clip, clone,
    cos, div, eq, exp, expand, flatten, ge, gt, isfinite, isinf, isnan, le, lerp, log,
    log_softmax, lt, matmul, max, maximum, mean, min, minimum, mm, mul, ne, neg, permute, pow,
    relu, repeat, reshape, sigmoid, sign, sin, softmax, sqrt, squeeze, stack, sub, sum, t, tanh,
    transpose, unsqueeze, where,
)
from .ops.diagonals import diag, diagonal, trace, tril, triu  # noqa: E402
from .ops.gather_scatter import gather, index_add, index_select, scatter, scatter_add  # noqa: E402
from .ops.masked import masked_fill, masked_select  # noqa: E402
from .ops.scans import cumprod, cumsum  # noqa: E402
from .ops.sorting import argsort, sort, topk  # noqa: E402
from .ops.splitting import chunk, split, unbind  # noqa: E402
from .ops.logical import logical_and, logical_not, logical_or, logical_xor  # noqa: E402
from .ops.functional import erf, expm1, log1p  # noqa: E402
from .generator import Generator  # noqa: E402
from . import linalg  # noqa: E402
from .ops.counting import allclose, bincount, equal, isclose, mode, nonzero, unique  # noqa: E402
from .ops.einsum import einsum  # noqa: E402
from .ops.norms import cdist, norm  # noqa: E402
from .ops.sampling import bernoulli, multinomial  # noqa: E402
from .ops.statistics import logsumexp, std, var  # noqa: E402
from .random import manual_seed  # noqa: E402
from .serialization import load, save  # noqa: E402
from .tensor import Size, Tensor, is_tensor, tensor  # noqa: E402

float = float32  # noqa: A001  (tg.float, like torch.float)
double = float64
long = int64
half = float16

__version__ = "0.1.0"


def __getattr__(name: str):
    # heavier subpackages load on first use, so `import teachgrad` stays quick
    import importlib
    if name in ("nn", "optim", "data", "cuda", "kernels", "bench", "exercises", "widgets",
                "utils", "jit", "onnx", "distributed", "tune", "amp", "profiler", "gpt"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):  # (tg.autocast)
        return getattr(importlib.import_module(f"{__name__}.amp"), name)
    if name == "compile":  # tg.compile, like torch.compile (lives in teachgrad.jit)
        return importlib.import_module(f"{__name__}.jit").compile
    from .unsupported import module_attribute_error
    raise module_attribute_error(__name__, name)
