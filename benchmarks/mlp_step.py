"""One training step of an MLP (784-256-10, batch 128, Adam), teachgrad vs PyTorch on the CPU.

    python benchmarks/mlp_step.py
    python benchmarks/mlp_step.py --quick
    python benchmarks/mlp_step.py --clock cpu   # the thread's CPU time (crowded machine)

The step is what a training loop repeats: zero the grads, forward, cross-entropy
loss, backward, Adam update. Both libraries start from the same weights and
see the same batch, so they do the same arithmetic; the two take turns, many
steps per timing, and the median, minimum and maximum timings are reported
with the ratio teachgrad / PyTorch. Target: at most 1.0x.

Each library gets one thread (``common.py`` sets ``OMP_NUM_THREADS=1`` and
friends unless they are set already, and ``torch.set_num_threads``): two
thread pools on a shared machine make timings erratic, and the point is the
code, not the pools.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402

SIZES = (784, 256, 10)
BATCH = 128
TARGET = 1.0


def start_weights(rng: np.random.Generator) -> list[np.ndarray]:
    """PyTorch's Linear init (uniform in ±1/sqrt(fan_in)) for weights and biases, as arrays."""
    arrays = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(fan_in)
        arrays.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        arrays.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return arrays


def build(lib: Any, weights: list[np.ndarray]) -> tuple[Any, Any, Any]:
    """The same model, loss and optimizer in either library (their APIs agree)."""
    layers = [lib.nn.Linear(SIZES[0], SIZES[1]), lib.nn.ReLU(), lib.nn.Linear(SIZES[1], SIZES[2])]
    model = lib.nn.Sequential(*layers)
    with lib.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(lib.tensor(w))
    return model, lib.nn.CrossEntropyLoss(), lib.optim.Adam(model.parameters(), lr=1e-3)


def training_step(model: Any, loss_fn: Any, optimizer: Any, x: Any, y: Any) -> None:
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()


def step_for(lib: Any) -> Any:
    rng = np.random.default_rng(0)
    model, loss_fn, optimizer = build(lib, start_weights(rng))
    x = lib.tensor(rng.standard_normal((BATCH, SIZES[0])).astype(np.float32))
    y = lib.tensor(rng.integers(0, SIZES[-1], BATCH))
    return lambda: training_step(model, loss_fn, optimizer, x, y)


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=5, repeats=25, quick=(3, 7), out="mlp_step.json",
                           extra=add_clock_option)
    torch = import_torch()
    run_header = header(torch)  # (before the timings: it records the load at the start)
    row = compare(step_for, torch, loops=args.loops, repeats=args.repeats, scale=1e3, unit="ms",
                  target=TARGET, clock=args.clock)
    print_table(
        f"one Adam training step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, milliseconds "
        f"of {args.clock} time "
        "(median of the timings; min in the last three columns)",
        table_columns(TARGET),
        [table_row(row, "ms")],
    )
    result = {"benchmark": "mlp_step", "header": run_header, "layers": list(SIZES),
              "batch": BATCH, "step": "zero_grad, forward, CrossEntropyLoss, backward, Adam(lr=1e-3).step",
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "target_ratio": TARGET, "result": row}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
