"""Exercise 17.1's checker: the reference attention passes, a stub is "not solved yet", and
realistic wrong answers are rejected with the input that shows it (the mutation run,
scripts/check_exercises.py, covers the mechanical ones)."""
from __future__ import annotations

import math

import pytest

import teachgrad as tg
from teachgrad.exercises import ch17


def attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """The chapter's reference solution."""
    if scale is None:
        scale = 1 / math.sqrt(query.shape[-1])
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        queries, keys = scores.shape[-2], scores.shape[-1]
        attn_mask = tg.ones(queries, keys, dtype=tg.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == tg.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return scores.softmax(-1) @ value


def test_the_reference_passes_and_a_stub_is_not_solved_yet():
    assert ch17.check_attention(attention).passed

    def stub(query, key, value, attn_mask=None, is_causal=False, scale=None):
        raise NotImplementedError("fill in")
    assert ch17.check_attention(stub).status == "not solved yet"


def _inverted_mask(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if attn_mask is not None and attn_mask.dtype == tg.bool:
        attn_mask = ~attn_mask  # MultiheadAttention's convention, not this function's
    return attention(query, key, value, attn_mask, is_causal, scale)


def _bottom_right_causal(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if is_causal:  # the last query sees every key: a different convention from PyTorch's
        queries, keys = query.shape[-2], key.shape[-2]
        attn_mask = tg.ones(queries, keys, dtype=tg.bool).tril(keys - queries)
    return attention(query, key, value, attn_mask, False, scale)


def _scale_by_queries(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return attention(query, key, value, attn_mask, is_causal, 1 / math.sqrt(query.shape[-2]))


def _off_the_graph(query, key, value, attn_mask=None, is_causal=False, scale=None):
    out = attention(query, key, value, attn_mask, is_causal, scale)
    return tg.tensor(out.detach().numpy())


def _ignores_float_masks(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if attn_mask is not None and attn_mask.dtype != tg.bool:
        attn_mask = None
    return attention(query, key, value, attn_mask, is_causal, scale)


def _the_library(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return tg.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                         is_causal=is_causal, scale=scale)


@pytest.mark.parametrize("wrong, failing_input, says", [
    (_inverted_mask, "a boolean mask", "attention output"),
    (_bottom_right_causal, "is_causal with L=", "attention output"),
    (_scale_by_queries, "no mask", "wrong attention output"),
    (_off_the_graph, "no mask", "backward gave no gradient for query"),
    (_ignores_float_masks, "a float mask", "wrong attention output"),
    (_the_library, "no mask", "your code called tg.nn.functional.scaled_dot_product_attention"),
])
def test_wrong_answers_are_rejected_naming_the_input(wrong, failing_input, says):
    feedback = ch17.check_attention(wrong)
    assert not feedback.passed
    assert feedback.failed_input.startswith(failing_input), feedback.failed_input
    assert says in feedback.message
