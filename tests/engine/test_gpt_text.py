"""The text shipped with teachgrad.gpt, its character vocabulary and its batches."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teachgrad as tg
from teachgrad import gpt


def test_the_shipped_text_is_a_few_hundred_kilobytes_of_shakespeare():
    text = gpt.load_text()
    assert 200_000 < len(text) < 500_000 and text.startswith("First Citizen:")
    assert gpt.CharVocabulary.from_text(text).size == len(set(text)) == 62


def test_unknown_text_names_are_refused():
    with pytest.raises(ValueError, match="no text named 'hamlet'"):
        gpt.load_text("hamlet")


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_encode_then_decode_gives_the_text_back(text):
    vocab = gpt.CharVocabulary.from_text(text)
    ids = vocab.encode(text)
    assert ids.dtype is tg.int64 and vocab.decode(ids) == text
    assert list(vocab.chars) == sorted(set(text))


def test_unknown_characters_and_ids_are_refused():
    vocab = gpt.CharVocabulary.from_text("abc")
    with pytest.raises(ValueError, match=r"\['z'\] are not in the vocabulary"):
        vocab.encode("abz")
    with pytest.raises(ValueError, match="ids must lie in 0..2"):
        vocab.decode([0, 3])
    with pytest.raises(ValueError, match="non-empty string"):
        gpt.CharVocabulary.from_text("")


def test_batches_are_windows_and_their_next_characters():
    ids = tg.arange(100)
    x, y = gpt.random_batch(ids, batch_size=5, block_size=7, generator=0)
    assert x.shape == y.shape == (5, 7)
    np.testing.assert_array_equal(np.diff(x.numpy(), axis=1), 1)  # consecutive ids
    np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)
    again, _ = gpt.random_batch(ids, batch_size=5, block_size=7, generator=0)
    assert tg.equal(x, again)


def test_split_and_batch_refuse_bad_sizes():
    ids = tg.arange(10)
    train, val = gpt.split_ids(ids, 0.8)
    assert len(train) == 8 and len(val) == 2
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        gpt.split_ids(ids, 1.0)
    with pytest.raises(ValueError, match="too few for windows of 10"):
        gpt.random_batch(ids, 2, 10)
    with pytest.raises(ValueError, match="must be positive"):
        gpt.random_batch(ids, 0, 3)
