"""One training step of a small CNN, teachgrad vs PyTorch on the CPU, with a per-layer breakdown.

    python benchmarks/cnn_step.py
    python benchmarks/cnn_step.py --quick
    python benchmarks/cnn_step.py --no-layers     # the whole step only

The network is two blocks of Conv2d(3x3, padding 1) -> BatchNorm2d -> ReLU ->
MaxPool2d(2), then a Linear layer: 3x32x32 images, 16 and 32 channels, 10
classes, batch 32, cross-entropy, SGD with momentum 0.9. Both libraries start
from the same weights and see the same batch, take turns (several steps per
timing) in one process on one thread each, and the median, minimum and maximum
timings are reported with the ratio teachgrad / PyTorch. Target: at most 1.5x.

With ``--clock cpu`` each timing is the CPU time of the calling thread instead
of the wall clock: on a crowded machine it leaves out the waits for a core.

The breakdown times each layer kind of the first block on its own input
(forward alone, and forward + backward), so that a slow step can be traced to
the layer that costs it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns,
    table_row,
)

import numpy as np  # noqa: E402

BATCH, CHANNELS, SIZE, CLASSES = 32, (3, 16, 32), 32, 10
TARGET = 1.5


def build(lib: Any) -> Any:
    """The network in either library (their APIs agree), weights from one seeded generator."""
    nn = lib.nn
    blocks = []
    for c_in, c_out in zip(CHANNELS[:-1], CHANNELS[1:]):
        blocks += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                   nn.MaxPool2d(2)]
    side = SIZE // 2 ** (len(CHANNELS) - 1)
    model = nn.Sequential(*blocks, nn.Flatten(), nn.Linear(CHANNELS[-1] * side * side, CLASSES))
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            bound = 1 / np.sqrt(max(p.numel() // p.shape[0], 1))
            p.copy_(lib.tensor(rng.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    return model


def batch(lib: Any) -> tuple[Any, Any]:
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((BATCH, CHANNELS[0], SIZE, SIZE)).astype(np.float32))
    return x, lib.tensor(rng.integers(0, CLASSES, BATCH))


def step_for(lib: Any) -> Callable[[], None]:
    model = build(lib)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()
    x, y = batch(lib)

    def step() -> None:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    return step


def layer_input(lib: Any, shape: tuple[int, ...]) -> Any:
    rng = np.random.default_rng(2)
    return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)


#: name -> (the layer in a library, the shape of its input): the first block's layers
LAYERS: dict[str, tuple[Callable[[Any], Any], tuple[int, ...]]] = {
    "conv 3->16": (lambda lib: lib.nn.Conv2d(3, 16, 3, padding=1), (BATCH, 3, SIZE, SIZE)),
    "conv 16->32": (lambda lib: lib.nn.Conv2d(16, 32, 3, padding=1), (BATCH, 16, 16, 16)),
    "batchnorm 16": (lambda lib: lib.nn.BatchNorm2d(16), (BATCH, 16, SIZE, SIZE)),
    "relu": (lambda lib: lib.nn.ReLU(), (BATCH, 16, SIZE, SIZE)),
    "maxpool 2": (lambda lib: lib.nn.MaxPool2d(2), (BATCH, 16, SIZE, SIZE)),
}


def layer_work(lib: Any, name: str, backward: bool) -> Callable[[], None]:
    make, shape = LAYERS[name]
    layer, x = make(lib), layer_input(lib, shape)
    if not backward:
        def forward() -> None:
            with lib.no_grad():
                layer(x)
        return forward
    grad = lib.ones(shape[:1] + tuple(layer(x).shape[1:]))

    def forward_backward() -> None:
        layer(x).backward(grad)
        x.grad = None
        layer.zero_grad()
    return forward_backward


def main(argv: list[str] | None = None) -> dict:
    def options(parser: Any) -> None:
        parser.add_argument("--no-layers", action="store_true", help="skip the per-layer breakdown")
        add_clock_option(parser)

    args = parse_arguments(__doc__, argv, loops=3, repeats=21, quick=(2, 7), out="cnn_step.json",
                           extra=options)
    torch = import_torch()
    run_header = header(torch)  # (before the timings: it records the load at the start)
    row = compare(step_for, torch, loops=args.loops, repeats=args.repeats, scale=1e3, unit="ms",
                  target=TARGET, clock=args.clock)
    print_table(f"one SGD-momentum training step, CNN {CHANNELS}, batch {BATCH} of "
                f"{CHANNELS[0]}x{SIZE}x{SIZE}, milliseconds of {args.clock} time (median; min in "
                "the last three columns)",
                table_columns(TARGET), [table_row(row, "ms")])
    layers: dict[str, dict] = {}
    if not args.no_layers:
        for name in LAYERS:
            for backward in (False, True):
                part = "forward+backward" if backward else "forward"
                layers[f"{name} {part}"] = compare(
                    lambda lib: layer_work(lib, name, backward), torch, loops=args.loops * 2,
                    repeats=args.repeats, scale=1e3, unit="ms", target=TARGET, clock=args.clock)
        print_table("each layer of the first block on its own, milliseconds (median; min in the "
                    "last three columns)", ["layer", *table_columns(TARGET)],
                    [[name, *table_row(r, "ms")] for name, r in layers.items()])
    result = {"benchmark": "cnn_step", "header": run_header, "batch": BATCH,
              "channels": list(CHANNELS), "image": [CHANNELS[0], SIZE, SIZE],
              "step": "zero_grad, 2 x (Conv2d 3x3 pad 1, BatchNorm2d, ReLU, MaxPool2d 2), Flatten, "
                      "Linear, CrossEntropyLoss, backward, SGD(lr=0.01, momentum=0.9).step",
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "target_ratio": TARGET, "result": row, "layers": layers}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
