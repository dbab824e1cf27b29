"""One training step of an LSTM language model, teachgrad vs PyTorch on the CPU.

    python benchmarks/lstm_step.py
    python benchmarks/lstm_step.py --quick
    python benchmarks/lstm_step.py --clock cpu

The model is a character-level language model as the tutorials write it:
``Embedding(65, 64)``, a one-layer ``LSTM(64, 128, batch_first=True)``, a
``Linear(128, 65)`` to the vocabulary at every step, cross-entropy against
the next character; batch 32 of 32 time steps; one Adam step. Both libraries
start from the same weights and see the same batch, so they do the same
arithmetic; they take turns, many steps per timing, and the median, minimum
and maximum timings are reported with the ratio teachgrad / PyTorch.
Target: at most 1.5x.

One thread each (``common.py``), as in ``mlp_step.py``. With ``--clock cpu`` each
timing is the CPU time of the calling thread instead of the wall clock: on a crowded
machine it leaves out the waits for a core.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402

VOCAB, EMBED, HIDDEN = 65, 64, 128
BATCH, STEPS = 32, 32
TARGET = 1.5


def start_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """PyTorch's default starts, drawn once here so both libraries get the same arrays."""
    lstm_bound, linear_bound = 1 / np.sqrt(HIDDEN), 1 / np.sqrt(HIDDEN)
    uniform = lambda bound, *shape: rng.uniform(-bound, bound, shape).astype(np.float32)  # noqa: E731
    return {
        "embed.weight": rng.standard_normal((VOCAB, EMBED)).astype(np.float32),
        "lstm.weight_ih_l0": uniform(lstm_bound, 4 * HIDDEN, EMBED),
        "lstm.weight_hh_l0": uniform(lstm_bound, 4 * HIDDEN, HIDDEN),
        "lstm.bias_ih_l0": uniform(lstm_bound, 4 * HIDDEN),
        "lstm.bias_hh_l0": uniform(lstm_bound, 4 * HIDDEN),
        "to_vocab.weight": uniform(linear_bound, VOCAB, HIDDEN),
        "to_vocab.bias": uniform(linear_bound, VOCAB),
    }


def language_model(lib: Any) -> Any:
    """Embedding -> LSTM -> Linear, as a Module of either library (their APIs agree)."""

    class LanguageModel(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = lib.nn.Embedding(VOCAB, EMBED)
            self.lstm = lib.nn.LSTM(EMBED, HIDDEN, batch_first=True)
            self.to_vocab = lib.nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens: Any) -> Any:
            output, _ = self.lstm(self.embed(tokens))
            return self.to_vocab(output)

    return LanguageModel()


def build(lib: Any, weights: dict[str, np.ndarray]) -> tuple[Any, Any, Any]:
    model = language_model(lib)
    with lib.no_grad():
        for name, p in model.named_parameters():
            p.copy_(lib.tensor(weights[name]))
    return model, lib.nn.CrossEntropyLoss(), lib.optim.Adam(model.parameters(), lr=1e-3)


def training_step(model: Any, loss_fn: Any, optimizer: Any, tokens: Any, targets: Any) -> None:
    optimizer.zero_grad()
    logits = model(tokens)
    loss = loss_fn(logits.reshape(BATCH * STEPS, VOCAB), targets.reshape(BATCH * STEPS))
    loss.backward()
    optimizer.step()


def step_for(lib: Any) -> Any:
    rng = np.random.default_rng(0)
    model, loss_fn, optimizer = build(lib, start_weights(rng))
    text = rng.integers(0, VOCAB, (BATCH, STEPS + 1))
    tokens, targets = lib.tensor(text[:, :-1]), lib.tensor(text[:, 1:])
    return lambda: training_step(model, loss_fn, optimizer, tokens, targets)


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=5, repeats=25, quick=(2, 7), out="lstm_step.json",
                           extra=add_clock_option)
    torch = import_torch()
    run_header = header(torch)  # (before the timings: it records the load at the start)
    row = compare(step_for, torch, loops=args.loops, repeats=args.repeats, scale=1e3, unit="ms",
                  target=TARGET, clock=args.clock)
    print_table(
        f"one Adam training step, LSTM language model (vocabulary {VOCAB}, embedding {EMBED}, "
        f"hidden {HIDDEN}, batch {BATCH} x {STEPS} steps), milliseconds of {args.clock} time "
        "(median of the timings; min in the last three columns)",
        table_columns(TARGET),
        [table_row(row, "ms")],
    )
    result = {"benchmark": "lstm_step", "header": run_header, "vocabulary": VOCAB,
              "embedding": EMBED, "hidden": HIDDEN, "batch": BATCH, "time_steps": STEPS,
              "step": "zero_grad, Embedding, LSTM(batch_first), Linear, CrossEntropyLoss, "
                      "backward, Adam(lr=1e-3).step",
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock, "target_ratio": TARGET, "result": row}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
