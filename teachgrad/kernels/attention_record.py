"""What the attention kernels did, recorded from real launches.

* :func:`record_online_softmax` -- one query row of the tiled kernel, tile by tile: the
  running max and sum after each key tile, the factor that rescaled the old terms, the
  row's scores, and its output as it stood after each tile. The kernel itself writes
  these (built with ``record=True``); nothing is re-enacted.
* :func:`count_attention_traffic` -- global-memory reads and writes of the tiled kernel
  and of the naive three-kernel version, counted access by access in the simulator
  (:func:`teachgrad.kernels.record.record_accesses`), beside the closed forms of
  :func:`attention_traffic_formulas`.

API::

    record_online_softmax(T=13, S=21, head_dim=4, block_q=4, block_k=4, causal=False,
                          row=None, seed=0) -> OnlineSoftmaxRecord
    count_attention_traffic(T, S, head_dim, heads=1, block_q=4, block_k=4, causal=False)
        -> {"flash": {...}, "naive": {...}}
    attention_traffic_formulas(T, S, head_dim, heads=1, block_q=4, block_k=4, causal=False)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import attention, attention_naive
from .transfer import to_device, to_host


@dataclass
class OnlineSoftmaxRecord:
    """One query row of the tiled attention kernel, after each key tile it visited.

    ``state[t] = (m before, m after, l after, rescale)`` for tile ``t`` (``rescale =
    exp(m_before - m_after)``, what the old sum and accumulator were multiplied by);
    ``partial_out[t]`` is ``acc / l`` after tile ``t``, the output had the row stopped
    there. Tiles the causal kernel skipped are not in these arrays (``visited`` tiles
    only). ``scores`` are the row's scaled scores (``-inf``: masked; NaN: in a skipped
    tile), ``out`` the row of the kernel's output, ``reference`` naive attention's.
    """

    T: int
    S: int
    head_dim: int
    block_q: int
    block_k: int
    causal: bool
    row: int
    scores: np.ndarray
    state: np.ndarray
    partial_out: np.ndarray
    out: np.ndarray
    reference: np.ndarray
    device: str
    steps: list[str] = field(default_factory=list)

    @property
    def tiles(self) -> int:
        """Key tiles in the whole sequence."""
        return -(-self.S // self.block_k)

    @property
    def visited(self) -> int:
        """Key tiles this row's block loaded (fewer than ``tiles`` when causal skips some)."""
        return len(self.state)

    def keys_of(self, tile: int) -> range:
        return range(tile * self.block_k, min((tile + 1) * self.block_k, self.S))

    def weights_after(self, tile: int) -> np.ndarray:
        """The softmax weights of every key as the row held them after ``tile``:
        ``exp(score - m) / l`` for the keys seen so far, 0 for the rest."""
        _, m, l, _ = self.state[tile]
        seen = np.zeros(self.S)
        upto = self.keys_of(tile).stop
        with np.errstate(over="ignore"):
            seen[:upto] = np.exp(self.scores[:upto].astype(np.float64) - m) / l
        return seen

    def final_weights(self) -> np.ndarray:
        """The exact softmax of the row (numpy, from the recorded scores)."""
        s = np.nan_to_num(self.scores.astype(np.float64), nan=-np.inf)
        w = np.exp(s - s.max())
        return w / w.sum()


def _steps(record: OnlineSoftmaxRecord) -> list[str]:
    steps = []
    for t in range(record.visited):
        m_before, m, l, rescale = record.state[t]
        keys = record.keys_of(t)
        change = (f"the max rose from {m_before:.3g} to {m:.3g}, so the old sum and "
                  f"accumulator were multiplied by exp({m_before:.3g} - {m:.3g}) = {rescale:.3g}"
                  if t and m > m_before else
                  "the max did not change: the old terms keep their scale (× 1)" if t else
                  f"the first tile: m = {m:.3g}, and the terms start")
        steps.append(f"tile {t} (keys {keys.start}..{keys.stop - 1}): {change}; l = {l:.4g}")
    if record.visited < record.tiles:
        steps[-1] += (f". Tiles {record.visited}..{record.tiles - 1} lie wholly right of the "
                      "diagonal for this block: causal skips them")
    return steps


def record_online_softmax(T: int = 13, S: int = 21, head_dim: int = 4, block_q: int = 4,
                          block_k: int = 4, causal: bool = False, row: int | None = None,
                          seed: int = 0) -> OnlineSoftmaxRecord:
    """Launch the tiled kernel (recording) on random q, k, v and follow query ``row``
    (default: the last). Scores are spread (standard deviation 2) so the max moves."""
    row = T - 1 if row is None else row
    if not 0 <= row < T:
        raise ValueError(f"row {row} is outside the {T} query rows (0 to {T - 1})")
    rng = np.random.default_rng(seed)
    q = (2 * rng.standard_normal((1, T, head_dim))).astype(np.float32)
    k, v = (rng.standard_normal((1, S, head_dim)).astype(np.float32) for _ in "kv")
    tiles = attention.tiles_visited(T, S, block_q, block_k, causal, row // block_q)
    state = to_device(np.full((tiles, 4), np.nan, np.float32))
    scores = to_device(np.full(S, np.nan, np.float32))
    partial = to_device(np.full((tiles, head_dim), np.nan, np.float32))
    O = to_device(np.zeros((1, T, head_dim), np.float32))
    attention.flash_forward(to_device(q), to_device(k), to_device(v), O,
                            to_device(np.zeros((1, T), np.float32)), causal=causal,
                            block_q=block_q, block_k=block_k,
                            trace=(0, row, state, scores, partial))
    out = to_host(O)[0, row]
    reference = attention.naive_attention(q, k, v, causal)[0, row]
    if not np.allclose(out, reference, rtol=1e-4, atol=1e-5):
        raise RuntimeError("the recorded attention kernel gave a wrong output row")
    from .record import _device_name

    record = OnlineSoftmaxRecord(T, S, head_dim, block_q, block_k, bool(causal), row,
                                 to_host(scores), to_host(state), to_host(partial), out,
                                 reference, _device_name())
    record.steps = _steps(record)
    return record


# -- memory traffic -------------------------------------------------------------------------

def _allowed_pairs(T: int, S: int, causal: bool) -> int:
    """(query, key) pairs that are scored: all, or key <= query when causal."""
    return sum(min(i + 1, S) for i in range(T)) if causal else T * S


def attention_traffic_formulas(T: int, S: int, head_dim: int, heads: int = 1, block_q: int = 4,
                               block_k: int = 4, causal: bool = False) -> dict[str, dict[str, int]]:
    """Global-memory element reads and writes of each version, in closed form.

    naive: the scores kernel reads ``2*D`` numbers per scored pair and writes ``T*S``
    scores; the softmax reads each row three times and writes ``T*S`` probabilities;
    the weighted sum reads ``2*S`` per output. tiled: q once per row, then every K and V
    element once per query block that visits its tile; ``T*D`` outputs and ``T`` LSEs.
    """
    D = head_dim
    naive_reads = 2 * D * _allowed_pairs(T, S, causal) + 3 * T * S + 2 * T * D * S
    naive_writes = T * S + T * S + T * D
    kv_rows = sum(min(S, attention.tiles_visited(T, S, block_q, block_k, causal, b) * block_k)
                  for b in range(-(-T // block_q)))
    flash_reads = T * D + 2 * kv_rows * D
    flash_writes = T * D + T
    return {"naive": {"global_reads": heads * naive_reads, "global_writes": heads * naive_writes,
                      "intermediate_elements": heads * 2 * T * S},
            "flash": {"global_reads": heads * flash_reads, "global_writes": heads * flash_writes,
                      "intermediate_elements": 0}}


def _count(records: list, globals_: set[str]) -> dict[str, int]:
    reads = sum(1 for r in records for a in r.accesses if a.array in globals_ and a.kind == "R")
    writes = sum(1 for r in records for a in r.accesses if a.array in globals_ and a.kind == "W")
    shared = sum(1 for r in records for a in r.accesses if a.array in r.shared)
    return {"global_reads": reads, "global_writes": writes, "shared_accesses": shared}


def count_attention_traffic(T: int, S: int, head_dim: int, heads: int = 1, block_q: int = 4,
                            block_k: int = 4, causal: bool = False,
                            seed: int = 0) -> dict[str, dict[str, int]]:
    """Run both versions once in the simulator and count every global access.

    Outputs are checked against :func:`~teachgrad.kernels.attention.naive_attention`
    first. ``intermediate_elements`` is the size of the global arrays a version needs
    besides its inputs and outputs (the naive one's scores and probabilities).
    """
    from .record import record_accesses

    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, n, head_dim)).astype(np.float32) for n in (T, S, S))
    expected = attention.naive_attention(q, k, v, causal)
    zeros = np.zeros  # (short: many arguments)
    kernel = attention.flash_attention_kernel(head_dim, block_q, block_k, bool(causal))
    flash = record_accesses(kernel, (-(-T // block_q), heads), block_q, q, k, v,
                            zeros((heads, T, head_dim), np.float32), zeros((heads, T), np.float32),
                            np.float32(1 / np.sqrt(head_dim)), -1, -1, zeros((1, 1), np.float32),
                            zeros(1, np.float32), zeros((1, 1), np.float32))
    arrays = [q, k, v, zeros((heads, T, head_dim), np.float32), zeros((heads, T, S), np.float32),
              zeros((heads, T, S), np.float32)]
    naive_records = []
    for kernel, grid, block, args in attention_naive.naive_launches(*arrays, causal=causal):
        record = record_accesses(kernel, grid, block, *args)
        _carry_outputs(args, record)  # the next launch reads what this one wrote
        naive_records.append(record)
    for got in (flash.arrays["O"], naive_records[-1].arrays["O"]):
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            raise RuntimeError("a counted attention launch gave a wrong output")
    result = {"flash": _count([flash], set(flash.arrays)),
              "naive": _count(naive_records, {n for r in naive_records for n in r.arrays})}
    result["flash"]["intermediate_elements"] = 0
    result["naive"]["intermediate_elements"] = 2 * heads * T * S
    return result


def _carry_outputs(args: tuple, record) -> None:
    """Copy what a recorded launch wrote back into its numpy arguments (it ran on copies)."""
    names = list(record.arrays)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    for name, array in zip(names, arrays):
        array[...] = record.arrays[name]
