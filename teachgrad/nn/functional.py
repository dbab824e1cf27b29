"""``teachgrad.nn.functional`` (import it as ``F``): layers and losses as plain functions.

Every function here is a few tensor operations; autograd differentiates them
for free, so none of them needs a backward of its own. The ``nn`` layers and
losses are thin wrappers that hold the hyperparameters and call these.
"""
from __future__ import annotations

import warnings

import teachgrad as tg
from teachgrad.autograd.cast_points import cast_point
from teachgrad.ops.linalg import Linear as LinearFunction
from teachgrad.ops.loss import CrossEntropy, NLLLoss
from teachgrad.tensor import Tensor

from .inplace import inplace_result as _result
from .loss_reduction import REDUCTIONS, _check_loss_options, _check_reduction, _reduce  # noqa: F401


# -- activations --------------------------------------------------------------
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)`` elementwise."""
    return _result(input, input.relu(), inplace)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent elementwise."""
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` elementwise."""
    return input.sigmoid()


def softmax(input: Tensor, dim: int) -> Tensor:
    """``exp(x) / exp(x).sum(dim)``, computed without overflow."""
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """``log(softmax(x))``, computed as ``x - logsumexp(x)`` so it never takes ``log(0)``."""
    return input.log_softmax(dim)


# -- layers -------------------------------------------------------------------
@cast_point("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: the affine map of :class:`~teachgrad.nn.Linear`.

    ``weight`` has shape ``(out_features, in_features)``, as in PyTorch, so each
    row of ``weight`` is the weights of one output unit.
    """
    if weight.ndim != 2:
        raise RuntimeError(
            f"linear: weight must be 2-D (out_features, in_features), got shape {tuple(weight.shape)}"
        )
    in_features = weight.shape[1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise RuntimeError(
            f"linear: input of shape {tuple(input.shape)} has {input.shape[-1] if input.ndim else 0} "
            f"features in its last dimension, but the weight of shape {tuple(weight.shape)} expects "
            f"{in_features}. Fix: make the layer's in_features match the input's last dimension."
        )
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"mat1 and mat2 must have the same dtype, but got {input.dtype} and {weight.dtype}: "
            f"the input is {input.dtype}, the layer's weight {weight.dtype}. Fix: convert one, "
            f"e.g. input.to({weight.dtype}) or model.to({input.dtype})"
        )
    if input.dtype == weight.dtype and (bias is None or (
            bias.dtype == weight.dtype and tuple(bias.shape) == (weight.shape[0],))):
        return LinearFunction.apply(input, weight, bias)
    output = input @ weight.T  # mixed dtypes or a bias to broadcast: separate operations
    return output if bias is None else output + bias


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the survivors by ``1/(1-p)``.

    The scaling keeps the expected value of every element unchanged, so at
    evaluation time (``training=False``) dropout is simply the identity.
    """
    _check_probability(p)
    return _drop(input, p, training, inplace, tuple(input.shape))


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels: each ``(sample, channel)`` feature map is dropped with
    probability ``p`` (the survivors scaled by ``1/(1-p)``), for inputs ``(N, C, H, W)``.

    Neighbouring pixels of a feature map are strongly correlated, so dropping single
    pixels barely regularises a convolution; dropping the whole map does. A 3-D input
    is read as ``(N, C, L)``, as PyTorch does (with its warning).
    """
    _check_probability(p)
    if input.dim() not in (3, 4):
        raise ValueError(f"dropout2d expects a 4-D input (N, C, H, W) or a 3-D one, got "
                         f"{input.dim()}-D with shape {tuple(input.shape)}")
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch "
                      "to using dropout1d instead.", stacklevel=2)
    mask_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return _drop(input, p, training, inplace, mask_shape)


def _drop(input: Tensor, p: float, training: bool, inplace: bool, mask_shape: tuple) -> Tensor:
    """Dropout with one keep-or-drop draw per element of ``mask_shape`` (broadcast over
    the rest of ``input``)."""
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _result(input, input * 0.0, inplace)
    keep = tg.rand(mask_shape, device=input.device) >= p  # True with probability 1 - p
    return _result(input, input * keep.to(input.dtype) * (1.0 / (1.0 - p)), inplace)


def _target_range(target: Tensor, ignore_index: int) -> tuple[int, int, bool]:
    """The smallest and largest target that is not ``ignore_index`` (0, 0 if none), and
    whether some target is ``ignore_index``."""
    if ignore_index < 0 and _extreme(target, "min") >= 0:
        return 0, _extreme(target, "max"), False  # the usual case: no target can be ignored
    counted = target[target != ignore_index]
    some_ignored = counted.numel() != target.numel()
    if counted.numel() == 0:
        return 0, 0, some_ignored
    return _extreme(counted, "min"), _extreme(counted, "max"), some_ignored


def _extreme(t: Tensor, op: str) -> int:
    backend = t._backend  # a reduction outside any graph: on the backend directly
    return int(backend.to_numpy(backend.reduce(op, t._array, None, False)))


def _describe(t: object) -> str:
    if isinstance(t, Tensor):
        return f"{t.dtype} tensor of shape {tuple(t.shape)} on {t.device}"
    return type(t).__name__


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


# -- losses -------------------------------------------------------------------
def _warn_if_broadcasting(name: str, input: Tensor, target: Tensor) -> None:
    # Broadcasting (N, 1) against (N,) silently builds an (N, N) loss: a classic bug.
    # PyTorch warns and goes on; so does teachgrad.
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"{name}: input has shape {tuple(input.shape)} but target has shape "
            f"{tuple(target.shape)}; broadcasting will compare every prediction with every "
            "target, which is likely not what you want. Fix: reshape one of them "
            "(e.g. target.view(-1, 1) or input.squeeze(-1)).",
            UserWarning,
            stacklevel=3,
        )


@cast_point("mse_loss")
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error: ``(input - target) ** 2``, then reduced."""
    _check_reduction(reduction)
    _warn_if_broadcasting("mse_loss", input, target)
    return _reduce((input - target) ** 2, reduction)


@cast_point("l1_loss")
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error: ``|input - target|``, then reduced."""
    _check_reduction(reduction)
    _warn_if_broadcasting("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction)


@cast_point("nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean", **options) -> Tensor:
    """Negative log-likelihood: ``-weight[c] * input[n, c]`` with ``c = target[n]``, then reduced.

    ``input`` holds log-probabilities of shape ``(N, C)`` (or ``(N, C, d1, ...)``
    with the classes in dimension 1, or ``(C,)`` for one sample); ``target``
    holds class indices (int64) of shape ``(N,)`` (or ``(N, d1, ...)``, or ``()``).
    Targets equal to ``ignore_index`` count for nothing; ``"mean"`` divides by the
    total weight of the targets that count (PyTorch's definition).
    """
    _check_loss_options("nll_loss", reduction, options)
    some_ignored = _check_class_targets("nll_loss", input, target, weight, ignore_index)
    return _pick_true_class(input, target, reduction, weight, ignore_index,
                            some_ignored=some_ignored)


def _pick_true_class(input: Tensor, target: Tensor, reduction: str,
                     weight: Tensor | None = None, ignore_index: int = -100,
                     label_smoothing: float = 0.0, *, some_ignored: bool) -> Tensor:
    """``-input[n, target[n]]`` for checked arguments (the body of ``nll_loss``);
    ``some_ignored``: whether a target equals ``ignore_index`` (the check found out)."""
    # Bring every case to a table with one row per prediction and one column per class.
    if input.ndim == 1:  # one sample: (C,)
        rows, flat_target = input.unsqueeze(0), target.reshape(1)
    elif input.ndim == 2:  # the usual batch: (N, C)
        rows, flat_target = input, target
    else:  # (N, C, d1, ...): move the classes last, then one row per position
        class_last = (0, *range(2, input.ndim), 1)
        rows = input.permute(*class_last).reshape(-1, input.shape[1])
        flat_target = target.reshape(-1)
    plain = weight is None and label_smoothing == 0 and not some_ignored
    if plain:  # one fused node (ops/loss.py)
        losses = NLLLoss.apply(rows, flat_target, reduction)
    else:
        losses = _weighted_nll(rows, flat_target, weight, ignore_index, reduction, label_smoothing)
    if input.ndim != 2 and reduction == "none":
        losses = losses.reshape(*target.shape)
    return losses


def _weighted_nll(rows: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
                  reduction: str, label_smoothing: float) -> Tensor:
    """The general case, in plain tensor operations: class weights, ignored targets, smoothing."""
    counts = (target != ignore_index).to(rows.dtype)  # 0 for the ignored rows
    safe = tg.where(target != ignore_index, target, 0)  # any valid class for the ignored rows
    w = counts if weight is None else weight[safe] * counts
    picked = rows[tg.arange(rows.shape[0], device=rows.device), safe]
    losses = -picked * w
    total = w.sum()
    if label_smoothing:
        # the smoothed target puts label_smoothing / C on every class
        per_class = rows if weight is None else rows * weight
        smooth = -per_class.sum(1) * counts
        losses = (1 - label_smoothing) * losses + (label_smoothing / rows.shape[1]) * smooth
    if reduction != "mean":
        return losses if reduction == "none" else losses.sum()
    # every target ignored: the mean is 0/0 = nan, as in PyTorch, but its gradient is 0
    empty = total == 0
    return losses.sum() / tg.where(empty, 1.0, total) + tg.where(empty, float("nan"), 0.0)


@cast_point("cross_entropy")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0, **options) -> Tensor:
    """Softmax cross-entropy from raw scores (logits) and integer class targets.

    It is ``nll_loss(log_softmax(input, dim=1), target)``: going through
    ``log_softmax`` rather than ``log(softmax(x))`` keeps it finite even when
    one logit is much larger than the others. ``weight``, ``ignore_index`` and
    ``label_smoothing`` mean what they mean in PyTorch.
    """
    _check_loss_options("cross_entropy", reduction, options)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) \
            or not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be a number in [0, 1], "
                         f"got {label_smoothing!r}")
    some_ignored = _check_class_targets("cross_entropy", input, target, weight, ignore_index)
    if weight is None and not label_smoothing and not some_ignored and CrossEntropy.takes(input):
        return CrossEntropy.apply(input, target, reduction)  # (one node on the CPU's arrays)
    class_dim = 0 if input.ndim == 1 else 1
    return _pick_true_class(input.log_softmax(class_dim), target, reduction, weight,
                            ignore_index, float(label_smoothing), some_ignored=some_ignored)


def _check_class_targets(name: str, input: Tensor, target: Tensor,
                         weight: Tensor | None = None, ignore_index: int = -100) -> bool:
    """Reject targets that are not class indices of the right shape and range; say
    whether some target is ``ignore_index`` (found on the way: no second look needed)."""
    if not input.dtype.is_floating_point:
        raise TypeError(
            f"{name}: input must hold floating-point scores, got {input.dtype}. "
            "Fix: convert it with input.float()."
        )
    if target.dtype != tg.int64:
        raise RuntimeError(
            f"{name}: target must hold integer class indices (int64), got {target.dtype}. "
            "teachgrad supports class-index targets only, not probabilities. "
            "Fix: convert it with target.long()."
        )
    if input.ndim == 0:
        raise ValueError(f"{name}: input must have a class dimension, got a 0-d tensor")
    if input.ndim == 1:
        expected = ()
        num_classes = input.shape[0]
    else:
        expected = (input.shape[0], *input.shape[2:])
        num_classes = input.shape[1]
    if tuple(target.shape) != expected:
        raise RuntimeError(
            f"{name}: for input of shape {tuple(input.shape)} (classes in dimension "
            f"{0 if input.ndim == 1 else 1}) target must have shape {expected}, got "
            f"{tuple(target.shape)}. Fix: pass one class index per sample, e.g. target.view(-1)."
        )
    if weight is not None and (not isinstance(weight, Tensor) or tuple(weight.shape) != (num_classes,)
                               or weight.dtype is not input.dtype or weight.device != input.device):
        raise RuntimeError(
            f"{name}: weight must be a {input.dtype} tensor of shape ({num_classes},) on "
            f"{input.device}, one weight per class; got {_describe(weight)}"
        )
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"{name}: ignore_index must be an int, got {ignore_index!r}")
    if target.numel() == 0:
        return False
    low, high, some_ignored = _target_range(target, ignore_index)
    if low < 0 or high >= num_classes:
        bad = low if low < 0 else high
        raise IndexError(
            f"{name}: target {bad} is out of bounds: class indices must lie in "
            f"[0, {num_classes - 1}] for {num_classes} classes."
        )
    return some_ignored


# -- layers with a file of their own (each module holds its layer class too) --
from .activations import elu, elu_, gelu, leaky_relu, leaky_relu_, silu, softplus  # noqa: E402
from .adaptive_pool import adaptive_avg_pool2d, adaptive_max_pool2d  # noqa: E402
from .group_norm import group_norm  # noqa: E402
from .conv import avg_pool2d, conv2d, max_pool2d  # noqa: E402
from .conv1d import conv1d  # noqa: E402
from .more_activations import (hardsigmoid, hardswish, hardtanh, hardtanh_,  # noqa: E402
                               logsigmoid, mish, relu6, selu, selu_)
from .losses_binary import binary_cross_entropy, binary_cross_entropy_with_logits  # noqa: E402
from .norm import batch_norm, layer_norm  # noqa: E402
from .sparse import embedding  # noqa: E402
from .attention import scaled_dot_product_attention  # noqa: E402
from teachgrad.ops.counting import one_hot  # noqa: E402,F401


def __getattr__(name: str):
    from teachgrad.unsupported import module_attribute_error
    raise module_attribute_error(__name__, name)
