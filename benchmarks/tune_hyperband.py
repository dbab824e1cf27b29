"""Hyperband against random search on chapter 13's objective, over several seeds.

The claim measured: Hyperband (by default R=81, eta=3: 1902 budget units) reaches a
validation loss within 5% of the best that random search finds with 71 full-budget
trials (71 x 81 = 5751 units, so Hyperband spends at most one third of it), taking
the median over 5 seeds. The objective is ``teachgrad.tune.objectives.spirals_objective``
(an MLP on the spirals, 5 SGD steps per budget unit) over the chapter's space (learning
rate, width, weight decay). Random search and Hyperband draw their configurations from
different seeds (``1000 + s`` and ``s``), so they do not share configurations.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/tune_hyperband.py [--seeds 5] [--workers 2]
        [--max-budget 81] [--steps-per-budget 5] [--out results/tune_hyperband.json]
"""
from __future__ import annotations

import argparse
import statistics
import time

from common import RESULTS, header, save

from teachgrad import tune
from teachgrad.tune.objectives import STEPS_PER_BUDGET, spirals_objective

SPACE = {
    "lr": tune.loguniform(1e-3, 3.0),
    "width": tune.choice([8, 16, 32]),
    "weight_decay": tune.loguniform(1e-6, 1e-2),
}
ETA = 3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-budget", type=int, default=81, help="Hyperband's R")
    parser.add_argument("--steps-per-budget", type=int, default=STEPS_PER_BUDGET,
                        help="SGD steps in one unit of budget (R x this = one full training)")
    parser.add_argument("--out", default=str(RESULTS / "tune_hyperband.json"))
    args = parser.parse_args(argv)
    max_budget = args.max_budget
    SPACE["steps_per_budget"] = args.steps_per_budget

    hb_budget = sum(r.n * r.budget for b in tune.hyperband_schedule(max_budget, ETA) for r in b)
    n_random = -(-3 * hb_budget // max_budget)  # enough full trials for 3x Hyperband's budget
    result = {"header": header(None), "max_budget": max_budget, "eta": ETA,
              "steps_per_budget": args.steps_per_budget, "random_trials": n_random,
              "workers": args.workers, "space": {k: repr(v) for k, v in SPACE.items()}, "runs": []}
    for seed in range(args.seeds):
        start = time.perf_counter()
        hb = tune.hyperband(spirals_objective, SPACE, max_budget, ETA, max_workers=args.workers,
                            seed=seed)
        hb_wall = time.perf_counter() - start
        start = time.perf_counter()
        rs = tune.random_search(spirals_objective, SPACE, n_random, max_budget,
                                max_workers=args.workers, seed=1000 + seed)
        rs_wall = time.perf_counter() - start
        run = {"seed": seed,
               "hyperband": {"best_loss": hb.best_loss, "best_config": hb.best_config,
                             "total_budget": hb.total_budget, "trials": len(hb.trials),
                             "failed": len(hb.failed), "wall_s": hb_wall},
               "random_search": {"best_loss": rs.best_loss, "best_config": rs.best_config,
                                 "total_budget": rs.total_budget, "trials": len(rs.trials),
                                 "failed": len(rs.failed), "wall_s": rs_wall},
               "loss_ratio": hb.best_loss / rs.best_loss,
               "budget_ratio": hb.total_budget / rs.total_budget}
        result["runs"].append(run)
        print(f"seed {seed}: hyperband {hb.best_loss:.4f} ({hb.total_budget:g} units, {hb_wall:.0f} s)"
              f" | random {rs.best_loss:.4f} ({rs.total_budget:g} units, {rs_wall:.0f} s)"
              f" | loss ratio {run['loss_ratio']:.3f}", flush=True)
    ratios = [r["loss_ratio"] for r in result["runs"]]
    budgets = [r["budget_ratio"] for r in result["runs"]]
    result["summary"] = {
        "loss_ratio_median": statistics.median(ratios), "loss_ratio_min": min(ratios),
        "loss_ratio_max": max(ratios), "budget_ratio_median": statistics.median(budgets),
        "target": "loss_ratio_median <= 1.05 and budget_ratio <= 1/3",
        "target_met": statistics.median(ratios) <= 1.05 and max(budgets) <= 1 / 3,
    }
    print(result["summary"])
    save(result, __import__("pathlib").Path(args.out))


if __name__ == "__main__":
    main()
