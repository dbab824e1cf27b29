"""Autocast's op lists: which operations run in the low precision, which in float32.

The names and the lists are PyTorch's ("Automatic Mixed Precision package - torch.amp",
autocast op reference), one table per device type. An operation not named here runs
in whatever dtype its inputs have (so ``relu`` of a bfloat16 tensor stays bfloat16).

- ``LOWER``: operations that are fast and safe in 16 bits (matrix products and
  convolutions: the sums inside them accumulate in float32). Their floating-point
  inputs are cast to autocast's dtype.
- ``FLOAT32``: operations whose result would suffer in 16 bits (exp and log lose range;
  sums and losses lose the small terms). Their 16-bit inputs are cast to float32.
- ``PROMOTE``: operations of several tensors that run in the widest dtype among them.

Names of operations teachgrad does not have are listed too, so the table reads as
PyTorch's; :data:`FUNCTION_NAMES` ties teachgrad's Functions to their names.
"""
from __future__ import annotations

from ..ops import (activation, elementwise, linalg, loss, norms, normalization,
                   pointwise_activation, reduce, scans)

LOWER = "lower"
FLOAT32 = "float32"
PROMOTE = "promote"

_CUDA_LOWER = """
    __matmul__ addbmm addmm addmv addr baddbmm bmm chain_matmul multi_dot conv1d conv2d
    conv3d conv_transpose1d conv_transpose2d conv_transpose3d GRUCell linear LSTMCell
    matmul mm mv prelu RNNCell
"""
_CUDA_FLOAT32 = """
    __pow__ __rdiv__ __rpow__ __rtruediv__ acos asin binary_cross_entropy_with_logits cosh
    cosine_embedding_loss cdist cosine_similarity cross_entropy cumprod cumsum dist erfinv
    exp expm1 group_norm hinge_embedding_loss kl_div l1_loss layer_norm log log_softmax
    log10 log1p log2 margin_ranking_loss mse_loss multilabel_margin_loss multi_margin_loss
    nll_loss norm normalize pdist poisson_nll_loss pow prod reciprocal rsqrt sinh
    smooth_l1_loss soft_margin_loss softmax softmin softplus sum renorm tan
    triplet_margin_loss
"""
_CUDA_PROMOTE = """
    addcdiv addcmul atan2 bilinear cross dot grid_sample index_put scatter_add tensordot
"""
_CPU_LOWER = """
    conv1d conv2d conv3d bmm mm linalg_vecdot baddbmm addmm addbmm linear _convolution
    matmul conv_tbc mkldnn_rnn_layer conv_transpose1d conv_transpose2d conv_transpose3d
    prelu scaled_dot_product_attention _native_multi_head_attention
"""
_CPU_FLOAT32 = """
    avg_pool3d binary_cross_entropy grid_sampler polar prod quantile nanquantile stft
    cdist trace view_as_complex cholesky cholesky_inverse cholesky_solve inverse lu_solve
    orgqr ormqr pinverse max_pool3d max_unpool2d max_unpool3d adaptive_avg_pool3d
    reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d replication_pad3d
    mse_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss
    poisson_nll_loss cross_entropy smooth_l1_loss huber_loss margin_ranking_loss
    soft_margin_loss triplet_margin_loss multi_margin_loss ctc_loss kl_div
    multilabel_margin_loss binary_cross_entropy_with_logits
"""
_CPU_PROMOTE = """
    stack cat index_copy
"""


def _table(lower: str, float32: str, promote: str) -> dict[str, str]:
    table = {name: LOWER for name in lower.split()}
    table.update({name: FLOAT32 for name in float32.split()})
    table.update({name: PROMOTE for name in promote.split()})
    return table


#: device type -> operation name -> LOWER, FLOAT32 or PROMOTE
POLICY: dict[str, dict[str, str]] = {
    "cpu": _table(_CPU_LOWER, _CPU_FLOAT32, _CPU_PROMOTE),
    "cuda": _table(_CUDA_LOWER, _CUDA_FLOAT32, _CUDA_PROMOTE),
}

#: teachgrad's Functions under their names in the tables (operations built from several
#: Functions, such as ``cross_entropy``, are marked with ``autograd.cast_points`` instead)
FUNCTION_NAMES: dict[type, str] = {
    linalg.MatMul: "matmul",
    linalg.Linear: "linear",
    activation.Softmax: "softmax",
    activation.LogSoftmax: "log_softmax",
    elementwise.Exp: "exp",
    elementwise.Log: "log",
    elementwise.Pow: "pow",
    pointwise_activation.Log1p: "log1p",
    pointwise_activation.Expm1: "expm1",
    pointwise_activation.Softplus: "softplus",
    reduce.Sum: "sum",
    scans.CumSum: "cumsum",
    scans.CumProd: "cumprod",
    normalization.LayerNorm: "layer_norm",
    norms.VectorNorm: "norm",
    loss.NLLLoss: "nll_loss",
}


def rule_for(device_type: str, name: str | None) -> str | None:
    """What autocast on ``device_type`` does to operation ``name``: a rule, or None."""
    return POLICY[device_type].get(name) if name is not None else None
