"""Differentiable operations: one ``Function`` per op, grouped by kind.

- :mod:`.elementwise` — add, mul, exp, relu, ... (e.g. ``Mul``: forward and backward side by side)
- :mod:`.reduce` — sum, mean, max, min
- :mod:`.shape` — reshape, permute, expand, cat
- :mod:`.indexing` — ``x[...]`` and its backward (scatter-add)
- :mod:`.linalg` — matmul
- :mod:`.activation` — softmax, log_softmax
- :mod:`.pointwise_activation` — gelu, silu, elu, softplus, leaky_relu; erf, log1p, expm1
- :mod:`.convert` — ``.to(device)`` and ``.to(dtype)``
- :mod:`.functional` — the public functions (``tg.exp``...) that check arguments and call the Functions
"""
