"""Exercise 17.2: the online softmax, the heart of the tiled attention kernel.

The learner writes ``online_softmax_update(scores, v_tile, m, l, acc) -> (m, l)``, a
``@cuda.jit(device=True)`` function that folds one key tile into a query row's running
max ``m``, running sum ``l`` and accumulator ``acc`` (see
:func:`teachgrad.kernels.attention.online_softmax_update` for the contract). The checker
builds teachgrad's tiled attention kernel around it and launches it on ragged sizes,
causal and not, drawn afresh on every run, comparing the output and ``LSE = m + log l``
with naive attention (numpy). Three kinds of input aim at the usual slips:

* keys sorted so that the max rises tile after tile (an update that does not rescale
  the old sum and accumulator is wrong there) and falls (an update that forgets the
  running max is wrong, or overflows);
* scores spread over hundreds (``exp`` of an unshifted score overflows float32; a shift
  that is not the running max overflows or underflows to ``0 / 0``);
* causal rows whose last visited tile is wholly masked for them (``-inf`` everywhere:
  the running max must survive a tile that brings nothing).

Then it becomes the part ``cuda.online_softmax``: ``tg.kernels.flash_attention`` runs on it.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np

from ...streams import KernelError
from ..core import Feedback, Mismatch, Test, check, unseen_rng
from ..kernel_runs import is_device_function, is_stub, past_the_end

TOLERANCE = dict(rtol=2e-4, atol=2e-5)
OUT_OF_BOUNDS_HINT = ("scores has one entry per key of the tile, v_tile one row per key and "
                      "head_dim columns, acc head_dim entries: loop over range(scores.shape[0]) "
                      "for keys and range(acc.shape[0]) for features")


def _logsumexp(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    return (top + np.log(np.exp(s - top).sum(-1, keepdims=True)))[..., 0]


def _run(update: Callable, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool,
         block_q: int, block_k: int) -> tuple[np.ndarray, np.ndarray]:
    from ... import _cuda_setup
    from ...kernels import attention
    from ...kernels.transfer import to_device, to_host

    heads, T, D = q.shape
    with warnings.catch_warnings():  # a wrong update overflows: the comparison says so, once
        warnings.simplefilter("ignore", RuntimeWarning)
        if not _cuda_setup.is_simulated():  # a GPU checks no bounds: the simulator first
            attention.simulated_forward(q, k, v, causal, block_q, block_k, update)
        O = to_device(np.full((heads, T, D), np.nan, np.float32))
        L = to_device(np.full((heads, T), np.nan, np.float32))
        attention.flash_forward(to_device(q), to_device(k), to_device(v), O, L, causal=causal,
                                block_q=block_q, block_k=block_k, update=update)
        return to_host(O), to_host(L)


def _hint(got: np.ndarray, kind: str) -> str:
    if not np.isfinite(got).all():
        if kind == "spread":
            return ("exp overflowed or gave 0 / 0: subtract the running max before exp, "
                    "exp(score - m_new), where m_new = max(m, the tile's scores)")
        return ("a NaN or inf came out: start the new max from the running m (not -inf), "
                "so a tile whose scores are all -inf leaves m as it was, and "
                "exp(-inf - m) is 0")
    if kind == "rising":
        return ("when a tile brings a larger max, multiply the old l and every acc[d] by "
                "exp(m_old - m_new) before adding the new tile's terms")
    return ("for each key j: p = exp(scores[j] - m_new); l += p; acc[d] += p * v_tile[j, d]; "
            "return the new max and the new sum")


def _compare(update: Callable, q, k, v, causal: bool, block_q: int, block_k: int,
             kind: str) -> None:
    from ...kernels.attention import naive_attention

    try:
        got, lse = _run(update, q, k, v, causal, block_q, block_k)
    except (KernelError, OverflowError, IndexError) as error:
        # (a launch's error comes wrapped by the stream; the simulated run's, as it is)
        cause = error.__cause__ if isinstance(error, KernelError) else error
        if isinstance(cause, OverflowError):  # in the simulator, math.exp above ~709 raises
            raise Mismatch("exp overflowed inside the kernel (OverflowError)", "finite outputs",
                           "no output", _hint(np.array([np.inf]), kind),
                           show_values=False) from None
        if isinstance(cause, IndexError):
            raise past_the_end(cause, OUT_OF_BOUNDS_HINT) from None
        raise
    expected = naive_attention(q, k, v, causal)
    where = np.argwhere(~np.isclose(got, expected, **TOLERANCE))
    if len(where):
        h, i, d = (int(x) for x in where[0])
        raise Mismatch(f"wrong output at head {h}, query row {i}, feature {d}",
                       float(expected[h, i, d]), float(got[h, i, d]), _hint(got, kind))
    want = _logsumexp(q, k, causal)
    where = np.argwhere(~np.isclose(lse, want, rtol=1e-4, atol=1e-4))
    if len(where):
        h, i = (int(x) for x in where[0])
        raise Mismatch(f"the output is right but m + log(l) is not, at head {h}, query row {i}",
                       float(want[h, i]), float(lse[h, i]),
                       "return the running max and the running sum itself: l is the sum of "
                       "exp(score - m) over every key seen so far, with m the max of them all")


def _inputs(rng: np.random.Generator, heads: int, T: int, S: int, D: int, kind: str):
    q, k, v = (rng.standard_normal((heads, n, D)).astype(np.float32) for n in (T, S, S))
    if kind in ("rising", "falling"):  # one feature sorts the keys: scores rise (fall) along them
        q[..., 0] = np.abs(q[..., 0]) + 1.0
        order = np.linspace(-3, 3, S) * (1 if kind == "rising" else -1)
        k[..., 0] = order * math.sqrt(D)
    elif kind == "spread":  # scores from about -300 to 300
        q *= 12.0
        k *= 12.0
    return q, k, v


def check_online_softmax(online_softmax_update: Callable) -> Feedback:
    """Exercise 17.2: ``online_softmax_update(scores, v_tile, m, l, acc) -> (m, l)``, run
    inside the tiled attention kernel on ragged sizes and causal masks, then plugged in as
    ``cuda.online_softmax`` under ``tg.kernels.flash_attention``."""
    rng = unseen_rng()

    def make(description: str, heads: int, T: int, S: int, D: int, block_q: int,
             block_k: int, causal: bool, kind: str = "random") -> Test:
        seed = int(rng.integers(2**31))

        def run() -> None:
            if is_stub(online_softmax_update):
                raise NotImplementedError
            if not is_device_function(online_softmax_update):
                raise Mismatch("online_softmax_update must be a device function",
                               show_values=False, hint="decorate it with @cuda.jit(device=True): "
                               "each thread of the kernel calls it once per key tile")
            q, k, v = _inputs(np.random.default_rng(seed), heads, T, S, D, kind)
            _compare(online_softmax_update, q, k, v, causal, block_q, block_k, kind)

        mask = "causal" if causal else "no mask"
        return Test(f"{description}: {heads} head(s), T = {T}, S = {S}, head_dim {D}, "
                    f"tiles of {block_q} queries x {block_k} keys, {mask}", run)

    def drawn(causal: bool) -> Test:
        sizes = [int(x) for x in rng.integers(2, 14, size=2)]
        return make("sizes drawn afresh", int(rng.integers(1, 4)), *sizes,
                    int(rng.integers(1, 9)), int(rng.integers(2, 6)), int(rng.integers(2, 6)),
                    causal)

    tests = [make("one tile of keys", 1, 4, 3, 2, 4, 4, False),
             make("scores rising along the keys", 2, 7, 11, 3, 4, 3, False, "rising"),
             make("scores falling along the keys", 1, 6, 10, 2, 3, 4, False, "falling"),
             make("scores spread over hundreds", 2, 9, 13, 4, 4, 3, False, "spread"),
             make("causal, scores spread over hundreds", 1, 11, 11, 3, 4, 2, True, "spread"),
             make("causal, ragged", 2, 13, 9, 5, 4, 4, True),
             make("head_dim 1, more queries than keys", 1, 10, 5, 1, 4, 2, False),
             drawn(False), drawn(True), _plugged_test(online_softmax_update, rng)]
    return check("17.2", tests, candidate=online_softmax_update,
                 solved="your online softmax gives exact attention tile by tile, with no "
                        "overflow and no T x S matrix; tg.kernels.flash_attention ran on it.")


def _plugged_test(update: Callable, rng: np.random.Generator) -> Test:
    """As the part ``cuda.online_softmax``: ``tg.kernels.flash_attention`` on tensors."""
    seed = int(rng.integers(2**31))

    def run() -> None:
        import teachgrad as tg
        from ...kernels.attention import naive_attention
        from ..plugging import plugged

        if is_stub(update):
            raise NotImplementedError
        if not is_device_function(update):
            raise Mismatch("online_softmax_update must be a device function", show_values=False,
                           hint="decorate it with @cuda.jit(device=True)")
        values = np.random.default_rng(seed).standard_normal((3, 2, 9, 4)).astype(np.float32)
        q, k, v = (tg.tensor(values[i], device="cuda") for i in range(3))
        with plugged("cuda.online_softmax", update):
            got = tg.kernels.flash_attention(q, k, v, causal=True).cpu().numpy()
        expected = naive_attention(values[0], values[1], values[2], True)
        if not np.allclose(got, expected, **TOLERANCE):
            raise Mismatch("tg.kernels.flash_attention with your update plugged in gave a "
                           "wrong output", show_values=False, hint=_hint(got, "random"))

    return Test("plugged in as cuda.online_softmax: tg.kernels.flash_attention on 2 batches x 9 "
                "queries, causal", run)
