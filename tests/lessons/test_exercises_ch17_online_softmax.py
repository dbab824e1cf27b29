"""Exercise 17.2, the online softmax: right updates pass (the engine's own, and one that
keeps the tile's max apart), the usual slips are rejected with a hint that names them,
and the part is given back afterwards."""
from __future__ import annotations

import teachgrad  # noqa: F401  (first: chooses GPU or simulator before numba loads)

import math

import numpy as np
import pytest
from numba import cuda

import teachgrad as tg
from teachgrad.exercises import ch17
from teachgrad.kernels.attention import naive_attention, online_softmax_update, simulated_forward


@pytest.fixture(autouse=True)
def _nothing_left_plugged():
    yield
    assert tg.exercises.plugged_parts() == {}


def _rejected(feedback, *says: str) -> None:
    assert not feedback.passed, feedback.message
    for text in says:
        assert text in feedback.message, feedback.message


@cuda.jit(device=True)
def two_pass_update(scores, v_tile, m, l, acc):
    """Right too: the tile's own max first, then merged with the running one."""
    tile_max = -math.inf
    for j in range(scores.shape[0]):
        tile_max = max(tile_max, scores[j])
    m_new = max(m, tile_max)
    old = math.exp(m - m_new)
    for d in range(acc.shape[0]):
        acc[d] *= old
    total = 0.0
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        total += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l * old + total


@cuda.jit(device=True)
def forgets_to_rescale(scores, v_tile, m, l, acc):
    m_new = m
    for j in range(scores.shape[0]):
        m_new = max(m_new, scores[j])
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l


@cuda.jit(device=True)
def rescales_only_the_sum(scores, v_tile, m, l, acc):
    m_new = m
    for j in range(scores.shape[0]):
        m_new = max(m_new, scores[j])
    l = l * math.exp(m - m_new)
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l


@cuda.jit(device=True)
def never_shifts(scores, v_tile, m, l, acc):
    for j in range(scores.shape[0]):
        p = math.exp(scores[j])
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return 0.0, l


@cuda.jit(device=True)
def tile_max_only(scores, v_tile, m, l, acc):
    """Forgets the running max: a tile of smaller (or all masked) scores breaks it."""
    m_new = -math.inf
    for j in range(scores.shape[0]):
        m_new = max(m_new, scores[j])
    rescale = math.exp(m - m_new)
    l = l * rescale
    for d in range(acc.shape[0]):
        acc[d] = acc[d] * rescale
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l


@cuda.jit(device=True)
def returns_a_scaled_sum(scores, v_tile, m, l, acc):
    """The output is right (acc and l share the slip) but l is not the running sum."""
    m_new = m
    for j in range(scores.shape[0]):
        m_new = max(m_new, scores[j])
    rescale = math.exp(m - m_new)
    l = l * rescale
    for d in range(acc.shape[0]):
        acc[d] = 2 * acc[d] * rescale
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l


@cuda.jit(device=True)
def mixes_keys_and_features(scores, v_tile, m, l, acc):
    """Rescales acc over the tile's keys instead of its features: past the end of acc
    (4 keys, head_dim 2)."""
    m_new = m
    for j in range(scores.shape[0]):
        m_new = max(m_new, scores[j])
    rescale = math.exp(m - m_new)
    l = l * rescale
    for d in range(scores.shape[0]):
        acc[d] = acc[d] * rescale
    for j in range(scores.shape[0]):
        p = math.exp(scores[j] - m_new)
        l += p
        for d in range(acc.shape[0]):
            acc[d] += p * v_tile[j, d]
    return m_new, l


@pytest.mark.parametrize("update", [online_softmax_update, two_pass_update])
def test_right_updates_pass(update):
    feedback = ch17.check_online_softmax(update)
    assert feedback.passed, feedback.message


def test_the_usual_slips_are_rejected_with_their_hint():
    _rejected(ch17.check_online_softmax(forgets_to_rescale), "scores rising", "exp(m_old - m_new)")
    _rejected(ch17.check_online_softmax(rescales_only_the_sum), "every acc[d]")
    _rejected(ch17.check_online_softmax(mixes_keys_and_features),
              "a thread went past the end of an array", "range(acc.shape[0]) for features")
    _rejected(ch17.check_online_softmax(never_shifts), "spread over hundreds", "subtract the running max")
    _rejected(ch17.check_online_softmax(tile_max_only), "max(m, the tile's scores)")
    _rejected(ch17.check_online_softmax(returns_a_scaled_sum), "wrong output")


def test_a_stub_is_not_solved_yet_and_a_plain_function_is_refused():
    @cuda.jit(device=True)
    def stub(scores, v_tile, m, l, acc):
        raise NotImplementedError("fill in online_softmax_update")

    assert ch17.check_online_softmax(stub).status == "not solved yet"
    _rejected(ch17.check_online_softmax(online_softmax_update.py_func), "must be a device function",
              "@cuda.jit(device=True)")


def test_the_catalog_lists_it_as_a_build_exercise_of_the_part():
    [exercise] = [e for e in tg.exercises.catalog(17) if e.checker == "ch17.check_online_softmax"]
    assert (exercise.id, exercise.kind, exercise.plugs_into) == \
        ("17.2", "build", ("cuda.online_softmax",))
    assert "cuda.online_softmax" in tg.exercises.parts()


def test_plugging_takes_a_device_function_only_and_changes_nothing_otherwise():
    def plain(scores, v_tile, m, l, acc):
        return m, l
    with pytest.raises(TypeError, match=r"cuda\.online_softmax takes a device function.*"
                                        r"@cuda\.jit\(device=True\).*not a function"):
        tg.exercises.plug("cuda.online_softmax", plain)
    assert tg.exercises.plugged_parts() == {}
    with tg.exercises.plugged("cuda.online_softmax", two_pass_update) as part:
        assert part.fn is two_pass_update


def test_the_simulated_forward_is_the_kernels_forward_in_numpy_arrays():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, n, 3)).astype(np.float32) for n in (6, 9, 9))
    out, lse = simulated_forward(q, k, v, causal=True, block_q=4, block_k=4)
    np.testing.assert_allclose(out, naive_attention(q, k, v, True), rtol=1e-5, atol=1e-6)
    assert lse.shape == (2, 6) and np.isfinite(lse).all()
