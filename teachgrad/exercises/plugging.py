"""Your code inside the engine: plug a function of yours into one of teachgrad's parts.

    import teachgrad as tg

    def my_order(root):                        # your topological sort
        ...
    tg.exercises.plug("autograd.order", my_order)   # from now on, every backward uses it
    loss.backward()                                 # ... runs nodes in your order
    tg.exercises.unplug("autograd.order")           # the engine's own order again

    with tg.exercises.plugged("backward:Mul", my_mul_backward):
        tg.autograd.gradcheck(lambda a, b: a * b, (a, b))   # checks *your* formula

While a part is yours, everything built on it runs on it: ``backward()``, the
stepper (``tg.autograd.backward_steps``), ``gradcheck``, a training loop. If your
function raises, the error names the part and your line; if it returns something
the engine cannot use, the error says what was expected.

The parts (``tg.exercises.parts()`` lists them with what each receives and returns):

- ``autograd.order``: ``order(root) -> [nodes]``, the order backward visits nodes in.
- ``autograd.sum_to_shape``: ``sum_to_shape(grad, shape) -> tensor``, how a broadcast
  gradient is summed back to its input's shape.
- ``backward:<Op>`` (``backward:Mul``, ``backward:Div``, ``backward:MatMul``,
  ``backward:Sum`` ...): ``backward(ctx, grad) -> gradients``, one operation's formula.
- ``optim.sgd_step`` / ``optim.adam_step``: ``step(param, grad, state, group) -> new
  param``, the update ``tg.optim.SGD`` / ``tg.optim.Adam`` make to each parameter.
- ``cuda.map`` / ``cuda.reduce`` / ``cuda.matmul``: the kernels the ``cuda`` device runs
  for one-argument operations, sums and matrix products (``make_map(fn)``, a
  ``block_sum_rows(x, out)`` kernel, ``make_tiled_matmul(tile)``; see
  :mod:`teachgrad.kernels.parts`).
- ``cuda.online_softmax``: ``online_softmax_update(scores, v_tile, m, l, acc) -> (m, l)``,
  the device function the tiled attention kernel folds each key tile in with.
- ``tune.promote``: ``promote(losses, eta) -> [indices]``, which trials of a rung go on
  in ``tg.tune``'s successive halving, Hyperband and BOHB.
- ``nn.scaled_dot_product_attention``: ``attention(query, key, value, attn_mask, is_causal,
  scale) -> output``, the attention ``F.scaled_dot_product_attention``, ``MultiheadAttention``
  (``need_weights=False``) and the transformer layers run.
- ``amp.update_scale``: ``update_scale(scale, growth_tracker, found_inf, growth_factor,
  backoff_factor, growth_interval) -> (scale, growth_tracker)``, the rule
  ``tg.amp.GradScaler.update`` backs off and grows its loss scale by.
- ``distributed.ring_all_reduce``: ``ring_all_reduce(data, comm)``, the sum that DDP and
  ``all_reduce(algorithm="ring")`` run on each rank (SUM and AVG).
- ``compile.eliminate_dead_code`` / ``compile.eliminate_common_subexpressions`` /
  ``compile.fold_constants`` / ``compile.fuse_elementwise``: ``pass(graph) -> new graph``,
  a compiler pass; ``tg.compile`` compiles with yours (and compiles again when you plug or
  unplug one; see :mod:`teachgrad.jit.pass_parts`).
"""
from __future__ import annotations

from typing import Any, Callable

from ..autograd import parts as _parts
from ..autograd.parts import Part, PartError


def _declare_all(name: str | None = None) -> None:
    """Import the modules that declare parts, so every part can be named (the kernel
    parts, which bring numba, only when one of them is named or all are listed)."""
    from .. import nn, optim  # noqa: F401  (optim declares its steps; nn, its operations)
    if name is None or name.startswith("cuda."):
        from ..kernels import parts  # noqa: F401  (declares cuda.map, cuda.reduce, cuda.matmul)
        from ..kernels import attention  # noqa: F401  (declares cuda.online_softmax)
    if name is None or name.startswith("tune."):
        from .. import tune  # noqa: F401  (declares tune.promote)
    if name is None or name.startswith("compile."):
        from ..jit import passes  # noqa: F401  (declares the compiler's passes)
    if name is None or name.startswith("amp."):
        from .. import amp  # noqa: F401  (declares amp.update_scale)


def plug(part: str, fn: Callable) -> Part:
    """From now on, the engine runs ``fn`` as its part ``part`` (until :func:`unplug`).

    Returns the :class:`~teachgrad.autograd.parts.Part`; ``part.calls`` counts how
    often your function ran since.
    """
    _declare_all(part if isinstance(part, str) else None)
    return _parts.plug(part, fn)


def unplug(part: str | None = None) -> None:
    """Give the engine its own ``part`` back (every plugged part when ``part`` is None)."""
    _declare_all(part if isinstance(part, str) else "")
    for name in [part] if part is not None else list(_parts.plugged_parts()):
        _parts.unplug(name)


def plugged(part: str, fn: Callable) -> Any:
    """``with tg.exercises.plugged(part, fn): ...``: ``fn`` is the part inside the block only."""
    _declare_all(part if isinstance(part, str) else None)
    return _parts.plugged(part, fn)


def parts() -> dict[str, Part]:
    """Every part you can plug into, by name (``backward:<Op>`` stands for any operation)."""
    _declare_all()
    return {name: _parts._PARTS[name] for name in _parts.names() if name in _parts._PARTS}


def plugged_parts() -> dict[str, Callable]:
    """The parts that run your code now: name -> your function."""
    return _parts.plugged_parts()


__all__ = ["Part", "PartError", "parts", "plug", "plugged", "plugged_parts", "unplug"]
