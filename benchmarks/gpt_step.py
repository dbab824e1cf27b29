"""One AdamW training step of the tiny GPT at chapter 17's size, teachgrad vs PyTorch on the CPU.

    cd benchmarks && python gpt_step.py            # (with torch on the path for the ratio)
    cd benchmarks && python gpt_step.py --quick
    cd benchmarks && python gpt_step.py --clock cpu   # the thread's CPU time (crowded machine)

teachgrad runs ``teachgrad.gpt.GPT`` itself; PyTorch runs the same architecture written
in torch (``scripts/torch_gpt.py``: nanoGPT's model, attention through
``F.scaled_dot_product_attention(is_causal=True)``), started from teachgrad's weights,
on the same batch of the shipped text. A step: ``zero_grad``, forward, cross-entropy,
backward, ``AdamW.step``. The two libraries take turns, many steps per timing; median,
minimum and maximum of each, and the ratio teachgrad / PyTorch. One thread each
(``common.py``). Target: at most 1.2x.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
    table_columns, table_row,
)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import teachgrad as tg  # noqa: E402
from teachgrad import gpt  # noqa: E402

#: chapter 17's model and batch (its notebook trains this on the cpu), then the same model
#: twice as wide, to show how the ratio moves when each operation has more to compute
SIZES = {"chapter": dict(block_size=64, n_layer=2, n_head=4, n_embd=64),
         "wider": dict(block_size=64, n_layer=2, n_head=4, n_embd=128)}
BATCH = 16
TARGET = 1.2


def engine_model_and_batch(size: dict) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    text = gpt.load_text()
    vocab = gpt.CharVocabulary.from_text(text)
    tg.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=vocab.size, **size))
    x, y = gpt.random_batch(vocab.encode(text), BATCH, size["block_size"], generator=0)
    return model, model.config, x.numpy(), y.numpy()


def step_for(lib: Any, size: dict) -> Any:
    model, config, x, y = engine_model_and_batch(size)
    if lib is not tg:  # the same weights, copied name by name into the torch model
        from torch_gpt import build, copy_weights
        weights = {name: p.detach().numpy() for name, p in model.named_parameters()}
        model = build(lib, config)
        copy_weights(lib, model, weights)
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    idx, targets = lib.tensor(x), lib.tensor(y)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model.loss(idx, targets).backward()
        optimizer.step()
    return step


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=3, repeats=21, quick=(2, 5), out="gpt_step.json",
                           extra=add_clock_option)
    torch = import_torch()
    run_header = header(torch)
    rows = {}
    for name, size in SIZES.items():
        rows[name] = row = compare(lambda lib: step_for(lib, size), torch, loops=args.loops,
                                   repeats=args.repeats, scale=1e3, unit="ms", target=TARGET,
                                   clock=args.clock)
        print_table(f"{name}: one AdamW step of teachgrad.gpt.GPT ({size}, batch {BATCH}), "
                    f"milliseconds of {args.clock} time (median; min in the last three columns)", table_columns(TARGET),
                    [table_row(row, "ms")])
        if row["ratio_max"] is not None:
            print(f"ratio of maxima: {row['ratio_max']:.2f}")
    result = {"benchmark": "gpt_step", "header": run_header,
              "shapes": {name: dict(size, batch=BATCH) for name, size in SIZES.items()},
              "step": "zero_grad, GPT forward (SDPA is_causal), cross_entropy, backward, "
                      "AdamW(lr=1e-3, weight_decay=0.1).step",
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock,
              "target_ratio": TARGET,
              "result": rows["chapter"], "result_wider": rows["wider"]}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
