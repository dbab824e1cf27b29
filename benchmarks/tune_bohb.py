"""BOHB against Hyperband on chapter 13's objective, same schedule, over several seeds.

Both run Hyperband's brackets for the same ``max_budget`` and ``eta`` (so the same
total budget, unless a bracket ends early because all its trials failed); BOHB draws
its configurations from a kernel-density model once a budget has enough results.
Each seed is given to both: until BOHB has a model it draws exactly Hyperband's
configurations, so the first bracket is shared and the comparison is paired. The
objective is ``teachgrad.tune.objectives.spirals_objective`` (an MLP on the spirals)
over the chapter's space (learning rate, width, weight decay); the defaults are the
chapter's own search (R = 27, eta = 3, 5 SGD steps per unit of budget).

    PYTHONPATH=. python benchmarks/tune_bohb.py [--seeds 8] [--workers 2]
        [--max-budget 27] [--steps-per-budget 5] [--iterations 1] [--out results/tune_bohb.json]

``--iterations N`` runs Hyperband's brackets N times over in both methods (the paper's
BOHB keeps going; its model has more to learn from in later iterations). Hyperband
repeated is ``tune.bohb(..., random_fraction=1)``: the same brackets, all random.

Each setting (max budget, steps per budget unit) is stored under its own key,
e.g. ``"R27_steps15"``, in the output file; other settings already there are kept.

Numbers reported per method: the median, min and max over seeds of the best
validation loss (at the largest budget reached), the total budget and the wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from common import RESULTS, header

from teachgrad import tune
from teachgrad.tune.objectives import STEPS_PER_BUDGET, spirals_objective

SPACE = {
    "lr": tune.loguniform(1e-3, 3.0),
    "width": tune.choice([8, 16, 32]),
    "weight_decay": tune.loguniform(1e-6, 1e-2),
}
ETA = 3
METHODS = ("hyperband", "bohb")


def search(method: str, space: dict, max_budget: int, iterations: int, workers: int,
           seed: int) -> tune.SearchResult:
    """One search. Hyperband run several times over is BOHB with ``random_fraction=1``: the
    same brackets, every configuration drawn at random."""
    common = dict(max_workers=workers, seed=seed)
    if method == "bohb":
        return tune.bohb(spirals_objective, space, max_budget, ETA, n_iterations=iterations,
                         **common)
    if iterations == 1:
        return tune.hyperband(spirals_objective, space, max_budget, ETA, **common)
    return tune.bohb(spirals_objective, space, max_budget, ETA, n_iterations=iterations,
                     random_fraction=1.0, **common)


def run_one(method: str, space: dict, max_budget: int, iterations: int, workers: int,
            seed: int) -> dict:
    start = time.perf_counter()
    result = search(method, space, max_budget, iterations, workers, seed)
    return {"best_loss": result.best_loss, "best_config": result.best_config,
            "total_budget": result.total_budget, "trials": len(result.trials),
            "configs": len({t.config_id for t in result.trials}),
            "model_based_configs": len({t.config_id for t in result.trials if t.model_based}),
            "failed": len(result.failed), "wall_s": time.perf_counter() - start,
            "first_rung_median_loss": first_rung_losses(result)}


def first_rung_losses(result: tune.SearchResult) -> dict:
    """Median loss at the first rung of every bracket after the first (failed trials count as
    inf), of the configurations the model proposed and of the random ones: does the model
    propose better configurations than chance, on the same budgets?"""
    out = {}
    for label, flag in (("model_based", True), ("random", False)):
        losses = [t.loss if t.status == "ok" else float("inf") for t in result.trials
                  if t.bracket > 0 and t.rung == 0 and t.model_based == flag]
        out[label] = statistics.median(losses) if losses else None
    return out


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-budget", type=int, default=27)
    parser.add_argument("--steps-per-budget", type=int, default=STEPS_PER_BUDGET,
                        help="SGD steps in one unit of budget (max_budget x this: one training)")
    parser.add_argument("--iterations", type=int, default=1,
                        help="how many times each method runs Hyperband's brackets")
    parser.add_argument("--out", default=str(RESULTS / "tune_bohb.json"))
    args = parser.parse_args(argv)
    space = dict(SPACE, steps_per_budget=args.steps_per_budget)

    result = {"header": header(None), "max_budget": args.max_budget, "eta": ETA,
              "steps_per_budget": args.steps_per_budget, "iterations": args.iterations,
              "workers": args.workers,
              "threads_per_worker": 1, "space": {k: repr(v) for k, v in space.items()}, "runs": []}
    for seed in range(args.seeds):
        run = {"seed": seed}
        for method in METHODS:
            run[method] = run_one(method, space, args.max_budget, args.iterations, args.workers,
                                  seed)
        run["loss_ratio"] = run["bohb"]["best_loss"] / run["hyperband"]["best_loss"]
        result["runs"].append(run)
        print(f"seed {seed}: " + " | ".join(
            f"{m} {run[m]['best_loss']:.4f} ({run[m]['total_budget']:g} units, "
            f"{run[m]['wall_s']:.0f} s)" for m in METHODS) + f" | ratio {run['loss_ratio']:.3f}",
            flush=True)
    summary = {m: {"best_loss": spread([r[m]["best_loss"] for r in result["runs"]]),
                   "total_budget": spread([r[m]["total_budget"] for r in result["runs"]]),
                   "wall_s": spread([r[m]["wall_s"] for r in result["runs"]])} for m in METHODS}
    ratios = [r["loss_ratio"] for r in result["runs"]]
    summary["loss_ratio_bohb_over_hyperband"] = spread(ratios)
    summary["seeds_bohb_better"] = sum(r < 1 for r in ratios)
    result["summary"] = summary
    print(summary)
    key = f"R{args.max_budget}_steps{args.steps_per_budget}"
    if args.iterations > 1:
        key += f"_x{args.iterations}"
    save_setting(result, key, Path(args.out))


def save_setting(result: dict, key: str, path: Path) -> None:
    """Store one setting's result under ``key`` in ``path``, keeping the other settings."""
    stored = json.loads(path.read_text()) if path.exists() else {}
    settings = stored.get("settings", {})
    result["header"]["load_average_after"] = list(os.getloadavg())
    settings[key] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": settings}, indent=2) + "\n")
    print(f"wrote {key} to {path}")


if __name__ == "__main__":
    main()
