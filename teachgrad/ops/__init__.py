"""Differentiable operations: one ``Function`` per op, grouped by kind.

- :mod:`.elementwise` — add, mul, exp, relu, ... (e.g. ``Mul``: forward and backward side by side)
- :mod:`.reduce` — sum, mean, max, min
- :mod:`.shape` — reshape, permute, expand, cat
- :mod:`.indexing` — ``x[...]`` and its backward (scatter-add)
- :mod:`.gather_scatter` — gather, scatter(_add), index_select, index_add;  :mod:`.masked` — masked_fill/select
- :mod:`.sorting` — sort, argsort, topk;  :mod:`.scans` — cumsum, cumprod (a parallel scan)
- :mod:`.diagonals` — tril, triu, diagonal, diag, trace;  :mod:`.splitting` — split, chunk, unbind
- :mod:`.linalg` — matmul
- :mod:`.activation` — softmax, log_softmax
- :mod:`.pointwise_activation` — gelu, silu, elu, softplus, leaky_relu; erf, log1p, expm1
- :mod:`.convert` — ``.to(device)`` and ``.to(dtype)``
- :mod:`.statistics` — var, std, logsumexp; :mod:`.norms` — norm, vector/matrix norms, cdist
- :mod:`.einsum` — einsum, as indexing, sums and batched matrix products
- :mod:`.counting` — unique, nonzero, bincount, mode, isclose, one_hot; :mod:`.sampling` —
  multinomial, bernoulli
- :mod:`.functional` — the public functions (``tg.exp``...) that check arguments and call the Functions
"""
