"""``tg.compile`` of the whole tiny GPT against the same model run eagerly, at chapter 17's size.

    cd benchmarks && python gpt_compile.py                # wall clock
    cd benchmarks && python gpt_compile.py --clock cpu    # the thread's CPU time
    cd benchmarks && python gpt_compile.py --quick

Two cases, each on ``teachgrad.gpt.GPT`` with chapter 17's sizes (block_size 64, 2 layers,
4 heads, 64 channels, the shipped text's 62 characters) and a batch of 16 windows:

* **logits**: ``model(idx)`` under ``tg.no_grad()`` in eval mode, against
  ``tg.compile(model)(idx)``: one graph from the ids to the logits (embedding lookup
  included), run by the generated no-grad function;
* **train step**: ``zero_grad``, the loss, ``backward``, ``AdamW.step``, with the loss
  from ``model.loss`` against ``tg.compile(model.loss)`` (with gradients on, the compiled
  graph runs through autograd: its fused kernels and the same Functions as eager).

Eager and compiled take turns, timing after timing, one thread (``common.py``); the
compile happens before the timings. Reported: milliseconds per call, min / median / max
of each, and eager / compiled for each statistic (above 1: compiled is faster).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

from common import CLOCKS, header, parse_arguments, print_table, save, seconds_per_call

import teachgrad as tg  # noqa: E402
from teachgrad import gpt  # noqa: E402

#: chapter 17's model (section 17.5 trains this on the cpu) and its batch
SIZE = dict(block_size=64, n_layer=2, n_head=4, n_embd=64)
BATCH = 16


def model_and_batch() -> tuple[Any, Any, Any]:
    text = gpt.load_text()
    vocab = gpt.CharVocabulary.from_text(text)
    tg.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=vocab.size, **SIZE))
    x, y = gpt.random_batch(vocab.encode(text), BATCH, SIZE["block_size"], generator=0)
    return model, x, y


def logits_works() -> dict[str, Callable[[], object]]:
    model, x, _ = model_and_batch()
    model.eval()
    compiled = tg.compile(model)

    def eager() -> object:
        with tg.no_grad():
            return model(x)

    def fast() -> object:
        with tg.no_grad():
            return compiled(x)
    _same_numbers(eager(), fast(), "logits")
    return {"eager": eager, "compiled": fast}


def train_step_works() -> dict[str, Callable[[], object]]:
    works = {}
    for name in ("eager", "compiled"):
        model, x, y = model_and_batch()  # each its own model and optimizer, from the same start
        loss_fn = model.loss if name == "eager" else tg.compile(model.loss)
        optimizer = tg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)

        def step(model=model, loss_fn=loss_fn, optimizer=optimizer, x=x, y=y) -> object:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(x, y)
            loss.backward()
            optimizer.step()
            return loss
        works[name] = step
    _same_numbers(works["eager"](), works["compiled"](), "first step's loss")
    return works


def _same_numbers(eager: Any, compiled: Any, what: str) -> None:
    """Refuse to time a compiled model that computes something else."""
    gap = float((eager - compiled).abs().max())
    if gap > 1e-4:
        raise AssertionError(f"compiled and eager {what} differ by {gap}: nothing timed")


def row(seconds: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for stat in ("min", "median", "max"):
        eager, compiled = seconds["eager"][stat], seconds["compiled"][stat]
        out[f"eager_ms_{stat}"] = eager * 1e3
        out[f"compiled_ms_{stat}"] = compiled * 1e3
        out[f"eager_over_compiled_{stat}"] = eager / compiled
    return out


def main(argv: list[str] | None = None) -> dict:
    def clock_option(parser: Any) -> None:
        parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                            help="time by the wall clock (default) or the thread's CPU time")
    args = parse_arguments(__doc__, argv, loops=5, repeats=21, quick=(2, 5),
                           out="gpt_compile.json", extra=clock_option)
    run_header = header(None)
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.jit.TracerWarning)  # (attention's baked branch is right
        # for every causal input: chapter 17 explains it)
        for name, make in (("logits", logits_works), ("train_step", train_step_works)):
            seconds = seconds_per_call(make(), args.loops, args.repeats, clock=args.clock)
            rows[name] = r = row(seconds)
            print_table(f"{name}: GPT {SIZE}, batch {BATCH}, ms of {args.clock} time",
                        ["", "min", "median", "max"],
                        [[who, r[f"{who}_ms_min"], r[f"{who}_ms_median"], r[f"{who}_ms_max"]]
                         for who in ("eager", "compiled")]
                        + [["eager/compiled", *(r[f"eager_over_compiled_{s}"]
                                                for s in ("min", "median", "max"))]])
    result = {"benchmark": "gpt_compile", "header": run_header, "shape": dict(SIZE, batch=BATCH),
              "cases": {"logits": "model(idx) under no_grad, eval mode, vs tg.compile(model)",
                        "train_step": "zero_grad, loss, backward, AdamW(lr=1e-3, weight_decay=0.1)"
                                      ".step, loss from model.loss vs tg.compile(model.loss)"},
              "loops": args.loops, "repeats": args.repeats, "clock": args.clock, "result": rows}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
