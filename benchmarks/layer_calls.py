"""One call of each layer a transformer step runs, forward and forward + backward,
teachgrad vs PyTorch on the CPU, at the tiny GPT's shapes and at a toy size.

    cd benchmarks && python layer_calls.py                 # (with torch on the path)
    cd benchmarks && python layer_calls.py --clock cpu     # the thread's CPU time
    cd benchmarks && python layer_calls.py --quick

Shapes ("chapter"): chapter 17's GPT step, activations ``(16, 64, 64)``, 4 heads of 16,
the MLP's ``(16, 64, 256)``, the transformer step's attention scores ``(16, 4, 64, 64)``,
logits ``(1024, 62)``. The "toy" size (batch 1, 4 positions, width 8) leaves each call's
fixed cost: the Python around the arithmetic, which a GPT step pays about a hundred
times. Each case runs the layer as a user calls it (the module or ``F.``), the backward
from a gradient of ones made once. The libraries take turns; median, minimum and maximum,
and the ratio teachgrad / PyTorch. One thread each (``common.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402

SIZES = {"chapter": dict(batch=16, positions=64, width=64, heads=4, classes=62),
         "toy": dict(batch=1, positions=4, width=8, heads=2, classes=6)}
NAMES = ("LayerNorm", "F.gelu", "F.scaled_dot_product_attention(is_causal)", "F.softmax (scores)",
         "masked_fill(tril == 0, -inf)", "F.log_softmax (logits)", "F.cross_entropy", "Embedding")


def cases(lib: Any, size: dict) -> dict[str, tuple[Callable[[], Any], Any]]:
    """Each layer's call and the gradient its output gets (None: a scalar loss)."""
    F, rng = lib.nn.functional, np.random.default_rng(0)
    B, T, C, H, V = (size[k] for k in ("batch", "positions", "width", "heads", "classes"))

    def tensor(*shape, grad=True):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    x, wide, scores, logits = tensor(B, T, C), tensor(B, T, 4 * C), tensor(B, H, T, T), tensor(B * T, V)
    q, k, v = (tensor(B, H, T, C // H) for _ in range(3))
    targets, ids = lib.tensor(rng.integers(0, V, B * T)), lib.tensor(rng.integers(0, V, (B, T)))
    norm, embedding = lib.nn.LayerNorm(C), lib.nn.Embedding(V, C)
    mask = lib.tril(lib.ones(T, T))

    def ones(t):
        return lib.ones(*t.shape)
    return {
        "LayerNorm": (lambda: norm(x), ones(x)),
        "F.gelu": (lambda: F.gelu(wide), ones(wide)),
        "F.scaled_dot_product_attention(is_causal)": (
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), ones(q)),
        "F.softmax (scores)": (lambda: F.softmax(scores, dim=-1), ones(scores)),
        "masked_fill(tril == 0, -inf)": (
            lambda: scores.masked_fill(mask == 0, float("-inf")), ones(scores)),
        "F.log_softmax (logits)": (lambda: F.log_softmax(logits, dim=-1), ones(logits)),
        "F.cross_entropy": (lambda: F.cross_entropy(logits, targets), None),
        "Embedding": (lambda: embedding(ids), ones(x)),
    }


def work_for(name: str, size: dict, backward: bool) -> Callable[[Any], Callable[[], None]]:
    def make(lib: Any) -> Callable[[], None]:
        call, grad = cases(lib, size)[name]
        if backward:
            def work() -> None:
                out = call()
                out.backward() if grad is None else out.backward(grad)
            return work

        def forward_only() -> None:
            with lib.no_grad():
                call()
        return forward_only
    return make


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=20, repeats=15, quick=(5, 5), out="layer_calls.json",
                           extra=add_clock_option)
    torch = import_torch()
    run_header = header(torch)
    results: dict[str, Any] = {}
    for size_name, size in SIZES.items():
        rows, table = {}, []
        loops = args.loops if size_name == "chapter" else args.loops * 10  # (short calls)
        for name in NAMES:
            for backward in (False, True):
                label = f"{name} {'forward + backward' if backward else 'forward'}"
                rows[label] = row = compare(work_for(name, size, backward), torch, loops=loops,
                                            repeats=args.repeats, scale=1e6, unit="us", target=1.0,
                                            clock=args.clock)
                table.append([label, *table_row(row, "us")])
        print_table(f"{size_name} ({size}): microseconds per call of {args.clock} time (median; "
                    "min in the last three columns)", ["call", *table_columns(1.0)], table)
        results[size_name] = rows
    result = {"benchmark": "layer_calls", "header": run_header, "sizes": SIZES,
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "result": results}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
