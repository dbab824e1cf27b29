"""Exercise 17.1: scaled dot-product attention, built from the engine's own operations, then
run as the engine's attention inside ``MultiheadAttention`` and a transformer layer.

The learner writes ``attention(query, key, value, attn_mask=None, is_causal=False,
scale=None)``. The checker calls it on shapes drawn afresh (ragged ``L != S``, ``E != Ev``,
leading batch and head dimensions), with boolean, float and causal masks, and compares
its output and the gradients backward gives for query, key and value with the engine's
(``F.scaled_dot_product_attention``, withheld from the learner's code while it runs).
Then it plugs the function into the part ``nn.scaled_dot_product_attention`` and runs
a ``MultiheadAttention`` with padding and causal masks and a ``TransformerEncoderLayer``
on it, comparing outputs and every parameter's gradient with the same layers on the
engine's own attention, and reading the part's call count to see that the function ran.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import teachgrad as tg
from teachgrad import nn
from teachgrad.nn import attention as attention_module

from ..core import Feedback, Mismatch, Test, check, expect_close, expect_true, unseen_rng
from ..plugging import plugged
from ..withheld import withheld

PART = "nn.scaled_dot_product_attention"
RTOL, ATOL = 1e-9, 1e-11


def _withhold_attention():
    return withheld((nn.functional, "scaled_dot_product_attention",
                     "tg.nn.functional.scaled_dot_product_attention"),
                    (attention_module, "attention_weights", "teachgrad.nn.attention.attention_weights"))


def _tensor(array: np.ndarray) -> tg.Tensor:
    return tg.tensor(array, dtype=tg.float64, requires_grad=True)


def _run_with_grads(fn: Callable, arrays: dict[str, np.ndarray], upstream: np.ndarray,
                    **options: Any) -> tuple[Any, dict[str, Any]]:
    """``fn(query, key, value, **options)`` on fresh leaves; its output and the leaves'
    gradients after backward of ``sum(output * upstream)``."""
    leaves = {name: _tensor(a) for name, a in arrays.items()}
    out = fn(leaves["query"], leaves["key"], leaves["value"], **options)
    if not isinstance(out, tg.Tensor):
        raise Mismatch(f"your attention returned a {type(out).__name__}, not a Tensor",
                       hint="return weights @ value, a teachgrad tensor", show_values=False)
    if tuple(out.shape) != upstream.shape:
        raise Mismatch(f"wrong shape of the output: expected {list(upstream.shape)}, got "
                       f"{list(out.shape)}", hint="the output is (..., L, Ev): one row per "
                       "query, as wide as a value", show_values=False)
    if out.requires_grad:
        (out * tg.tensor(upstream)).sum().backward()
    return out, {name: leaf.grad for name, leaf in leaves.items()}


def _compare(attention: Callable, arrays: dict[str, np.ndarray], hint: str,
             **options: Any) -> None:
    """The learner's output and gradients against the engine's, on the same inputs."""
    upstream = np.random.default_rng(0).standard_normal(
        np.broadcast_shapes(arrays["query"].shape[:-2], arrays["key"].shape[:-2])
        + (arrays["query"].shape[-2], arrays["value"].shape[-1]))
    expected, expected_grads = _run_with_grads(nn.functional.scaled_dot_product_attention,
                                               arrays, upstream, **options)
    with _withhold_attention():
        got, grads = _run_with_grads(attention, arrays, upstream, **options)
    expect_close(got.detach(), expected.detach(), hint=hint, rtol=RTOL, atol=ATOL,
                 what="attention output")
    for name, grad in grads.items():
        expect_true(grad is not None, f"backward gave no gradient for {name}: your attention "
                    "left the engine's graph", hint="compute with tensor operations only (no "
                    ".numpy(), no .detach()), so autograd can differentiate it")
        expect_close(grad, expected_grads[name], hint=f"the gradient of {name} differs: " + hint,
                     rtol=RTOL, atol=ATOL, what=f"gradient of {name}")


def _shapes(rng: np.random.Generator, lead: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Query ``(*lead, L, E)``, key ``(*lead, S, E)``, value ``(*lead, S, Ev)``, with ``L``,
    ``S``, ``E`` and ``Ev`` all different (so no size can stand in for another)."""
    length, keys, width, value_width = (int(n) for n in rng.choice(np.arange(2, 9), size=4,
                                                                   replace=False))
    return {"query": rng.standard_normal((*lead, length, width)),
            "key": rng.standard_normal((*lead, keys, width)),
            "value": rng.standard_normal((*lead, keys, value_width))}


def _keep_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> tg.Tensor:
    """Booleans, True = take part, every query keeping at least one key (not always the first)."""
    mask = rng.random(shape) < 0.55
    rows = np.arange(int(np.prod(shape[:-1]))).reshape(shape[:-1])
    np.put_along_axis(mask, (rows % shape[-1])[..., None], True, axis=-1)
    return tg.tensor(mask)


def _direct_tests(attention: Callable, rng: np.random.Generator) -> list[Test]:
    def make(description: str, arrays: dict, hint: str, **options: Any) -> Test:
        return Test(description, lambda: _compare(attention, arrays, hint, **options))

    plain = _shapes(rng, (2,))
    batched = _shapes(rng, (2, 3))
    length, keys = batched["query"].shape[-2], batched["key"].shape[-2]
    tall = _shapes(rng, (2,))
    if tall["query"].shape[-2] < tall["key"].shape[-2]:  # more queries than keys
        tall["query"], tall["key"] = (np.concatenate([tall["query"]] * 3, axis=-2), tall["key"])
    float_mask = rng.standard_normal((3, length, keys))
    return [
        make(f"no mask, query {plain['query'].shape}, key {plain['key'].shape}", plain,
             "scores = query @ key.transpose(-2, -1) * scale, scale = 1 / sqrt(E) where E is the "
             "last dimension of query; softmax over the last dimension (the keys)"),
        make(f"a boolean mask (True = take part) of shape {(length, keys)}, batch and heads "
             f"{batched['query'].shape[:2]}", batched,
             "where the mask is False the score becomes -inf before the softmax "
             "(masked_fill(~mask, float('-inf')))", attn_mask=_keep_mask(rng, (length, keys))),
        make(f"a float mask of shape {float_mask.shape}, added to the scores", batched,
             "a float mask is added to the scaled scores, not used as a condition",
             attn_mask=tg.tensor(float_mask)),
        make(f"is_causal with L={length} queries, S={keys} keys", batched,
             "query i sees keys 0..i: a (L, S) mask tg.ones(L, S, dtype=tg.bool).tril()",
             is_causal=True),
        make(f"is_causal with more queries than keys: query {tall['query'].shape}, key "
             f"{tall['key'].shape}", tall, "the causal mask is (L, S), lower triangle from the "
             "top left: the last queries see every key", is_causal=True),
        make("scale=0.37 given", plain, "use the scale you are given; 1/sqrt(E) only when it "
             "is None", scale=0.37),
    ]


# -- inside the engine: MultiheadAttention and a transformer layer on the learner's part ------

def _layer_run(layer: nn.Module, run: Callable) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    layer.zero_grad()
    out = run(layer)
    out.sum().backward()
    return out.detach().numpy(), {n: p.grad.numpy() for n, p in layer.named_parameters()}


def _plugged_test(attention: Callable, description: str, make_layer: Callable,
                  run: Callable) -> Test:
    def check_layer() -> None:
        tg.manual_seed(0)
        layer = make_layer().double()
        expected, expected_grads = _layer_run(layer, run)
        with plugged(PART, attention) as part:
            got, grads = _layer_run(layer, run)
        expect_true(part.calls > 0, f"the layer never called your attention ({PART} plugged)")
        expect_close(got, expected, rtol=RTOL, atol=ATOL, what="layer output",
                     hint="the layer passes float masks (-inf = hidden) and is_causal: handle both")
        for name, grad in grads.items():
            expect_close(grad, expected_grads[name], rtol=RTOL, atol=ATOL,
                         what=f"gradient of {name}")
    return Test(description, check_layer)


def _engine_tests(attention: Callable, rng: np.random.Generator) -> list[Test]:
    length, batch = int(rng.integers(3, 6)), int(rng.integers(2, 4))
    x = tg.tensor(rng.standard_normal((batch, length, 8)))
    memory = tg.tensor(rng.standard_normal((batch, length + 2, 8)))
    padding = ~_keep_mask(rng, (batch, length + 2))
    causal = nn.transformer.generate_square_subsequent_mask(length, dtype=tg.float64)

    def cross(layer: nn.Module) -> tg.Tensor:
        return layer(x, memory, memory, key_padding_mask=padding, need_weights=False)[0]

    def self_causal(layer: nn.Module) -> tg.Tensor:
        return layer(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)[0]

    def encoder(layer: nn.Module) -> tg.Tensor:
        return layer(x, src_mask=causal, is_causal=True)

    return [
        _plugged_test(attention, f"plugged: MultiheadAttention(8, 2) over {length + 2} keys with "
                      "a key padding mask", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                      cross),
        _plugged_test(attention, f"plugged: causal self-attention, MultiheadAttention(8, 4), "
                      f"{length} steps", lambda: nn.MultiheadAttention(8, 4, batch_first=True),
                      self_causal),
        _plugged_test(attention, "plugged: a causal TransformerEncoderLayer(8, 2)",
                      lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                      encoder),
    ]


def check_attention(attention: Callable) -> Feedback:
    """Exercise 17.1: ``attention(query, key, value, attn_mask=None, is_causal=False,
    scale=None)`` is ``softmax(query @ key^T * scale + mask) @ value``, and runs the engine's
    multi-head attention and transformer layers when plugged in."""
    rng = unseen_rng()
    tests = _direct_tests(attention, rng) + _engine_tests(attention, rng)
    return check("17.1", tests, candidate=attention,
                 solved="your attention matches the engine's, values and gradients, with "
                        "boolean, float and causal masks; MultiheadAttention and a transformer "
                        "layer ran on it and trained the same gradients.")
