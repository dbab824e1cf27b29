"""The exercise checkers of chapter 14: the notebook's own solutions pass, the learner
edition's stubs are "not solved yet", and realistic wrong answers are rejected with
specific hints."""
from __future__ import annotations

import linecache
import math
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.exercises import ch14
from teachgrad.exercises.edition import learner_stub

from notebook_solutions import solution_source

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "14_data_parallelism.ipynb"
EXERCISES = [("data_parallel_gradient", ch14.check_data_parallel_gradient, "14.1"),
             ("send_chunk", ch14.check_ring_send_chunk, "14.2"),
             ("ring_all_reduce", ch14.check_ring_all_reduce, "14.3"),
             ("shard_indices", ch14.check_shard_indices, "14.4")]


def solution(name: str, stubbed: bool = False):
    """The chapter's solution cell run here; its source is kept where ``inspect`` finds it
    (as IPython keeps a cell's), since 14.3's checker sends that source to the ranks."""
    source = solution_source(NOTEBOOK.name, name)
    source = learner_stub(source) if stubbed else source
    filename = f"<ch14 cell {name}{' stub' if stubbed else ''}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"np": np, "tg": tg, "math": math}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("name, checker, number", EXERCISES)
def test_the_notebook_solution_passes_and_the_stub_is_not_solved_yet(name, checker, number):
    assert checker(solution(name)).passed
    feedback = checker(solution(name, stubbed=True))
    assert feedback.status == "not solved yet", feedback.message
    assert feedback.message == f"⏳ Exercise {number} not solved yet: fill in the cell above"


def wrong(feedback, *words: str) -> None:
    assert feedback.status in ("wrong", "error") and not feedback.passed, feedback.message
    for word in words:
        assert word in feedback.message, feedback.message


# --- 14.2 the ring's schedule -----------------------------------------------------------

def test_ring_with_the_same_formula_in_both_phases():
    wrong(ch14.check_ring_send_chunk(lambda phase, s, r, p: (r - s) % p),
          "wrong chunk for rank 0 at all-gather step 0", "(rank + 1) mod p")


def test_ring_without_modulo():
    wrong(ch14.check_ring_send_chunk(
        lambda phase, s, r, p: r - s if phase == "reduce-scatter" else r + 1 - s),
        "take the result modulo world_size")


def test_ring_turning_the_wrong_way():
    wrong(ch14.check_ring_send_chunk(
        lambda phase, s, r, p: (r + s) % p if phase == "reduce-scatter" else (r + 1 + s) % p),
        "world_size = 3", "subtract the step")


def test_ring_hard_coded_for_the_shown_sizes():
    table = {(ph, s, r, p): (r - s) % p if ph == "reduce-scatter" else (r + 1 - s) % p
             for p in (2, 3, 4) for ph in ("reduce-scatter", "all-gather")
             for s in range(p - 1) for r in range(p)}
    wrong(ch14.check_ring_send_chunk(lambda ph, s, r, p: table.get((ph, s, r, p), 0)),
          "wrong chunk")


# --- 14.2 the gradient average ----------------------------------------------------------

def per_rank_grads(w, X, y, p, zero=True, scale_by_n=False):
    grads = []
    for r in range(p):
        if zero:
            w.grad = None
        err = (X[r::p] @ w - y[r::p]) ** 2
        (err.sum() / len(y) if scale_by_n else err.mean()).backward()
        grads.append(w.grad.numpy().copy())
    return grads


def test_gradient_summed_instead_of_averaged():
    wrong(ch14.check_data_parallel_gradient(
        lambda w, X, y, p: np.sum(per_rank_grads(w, X, y, p), axis=0)),
        "8 samples, 3 weights, 2 ranks", "divide by world_size")


def test_gradient_without_zeroing_between_ranks():
    wrong(ch14.check_data_parallel_gradient(
        lambda w, X, y, p: np.mean(per_rank_grads(w, X, y, p, zero=False), axis=0)),
        "w.grad kept adding up")


def test_gradient_divided_by_n_on_each_rank():
    wrong(ch14.check_data_parallel_gradient(
        lambda w, X, y, p: np.mean(per_rank_grads(w, X, y, p, scale_by_n=True), axis=0)),
        "mean over *its* shard")


def test_gradient_of_rank_0_only():
    wrong(ch14.check_data_parallel_gradient(lambda w, X, y, p: per_rank_grads(w, X, y, p)[0]),
          "one rank's gradient")


# --- 14.4 a sampler's shards ------------------------------------------------------------

def test_shards_without_padding():
    wrong(ch14.check_shard_indices(lambda n, p, r, d: list(range(n))[r::p]),
          "n = 10, num_replicas = 3, drop_last = False", "wait forever")


def test_shards_as_contiguous_blocks():
    wrong(ch14.check_shard_indices(
        lambda n, p, r, d: list(range(r * math.ceil(n / p), min(n, (r + 1) * math.ceil(n / p))))),
        "strided")


def test_shards_padded_with_zeros():
    wrong(ch14.check_shard_indices(
        lambda n, p, r, d: (list(range(n)) + [0] * p)[: math.ceil(n / p) * p][r::p]),
        "repeating the first indices")


def test_shards_ignoring_drop_last():
    def padded_always(n, p, r, d):
        order = list(range(n))
        total = math.ceil(n / p) * p
        return (order + order)[:total][r::p]
    wrong(ch14.check_shard_indices(padded_always), "drop_last = True", "cut the tail")


def test_shards_starting_one_rank_late():
    def shifted(n, p, r, d):
        order = list(range(n))
        total = math.ceil(n / p) * p
        return (order + order)[:total][(r + 1) % p::p]
    wrong(ch14.check_shard_indices(shifted), "wrong indices for rank 0")
