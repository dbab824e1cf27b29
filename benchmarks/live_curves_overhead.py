"""What a LiveCurves chart listening to a SummaryWriter costs a training loop.

The same loop (chapter 12's spirals MLP, 200 full-batch SGD steps, three scalars logged
per step through a ``SummaryWriter``) is timed with and without a ``LiveCurves`` chart
listening, in turns so both see the same machine load, repeated. Reported: min / median /
max of each, their ratio, the redraws per run, and the cost of one ``add_scalar`` and of
one redraw measured alone. Outside a notebook the widget has no front end, so a redraw
here costs drawing the SVG and setting the widget's value, not sending it to a browser.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/live_curves_overhead.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import RESULTS, header, save

import teachgrad as tg
from teachgrad import nn, optim
from teachgrad.utils.tensorboard import SummaryWriter
from teachgrad.widgets import LiveCurves

STEPS = 200


def train(writer: SummaryWriter) -> None:
    X, y = tg.data.make_spirals(n_samples=300, n_classes=3, noise=0.2, seed=0)
    tg.manual_seed(1)
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        logits = model(X)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss/train", loss.item(), step)
        writer.add_scalar("accuracy/train", (logits.argmax(dim=1) == y).float().mean().item(), step)
        writer.add_scalar("lr", opt.param_groups[0]["lr"], step)


def run(log_dir: str, listen: bool) -> tuple[float, int]:
    with SummaryWriter(log_dir) as writer:
        chart = writer.add_listener(LiveCurves()) if listen else None
        start = time.perf_counter()
        train(writer)
        elapsed = time.perf_counter() - start
    return elapsed, (chart.redraws - 1 if chart else 0)


def unit_costs() -> dict:
    chart = LiveCurves(max_fps=1e-9)  # never redraws on its own
    start = time.perf_counter()
    for i in range(30_000):
        chart.add_scalar("loss", 1.0 / (i + 1), i)
    per_add = (time.perf_counter() - start) / 30_000
    redraws = []
    for _ in range(20):
        start = time.perf_counter()
        chart.redraw()
        redraws.append(time.perf_counter() - start)
    return {"add_scalar_s": per_add, "redraw_30000_points_median_s": statistics.median(redraws)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(RESULTS / "live_curves_overhead.json"))
    args = parser.parse_args(argv)
    head = header(None)  # (its load average: before the runs)
    times: dict[bool, list[float]] = {False: [], True: []}
    redraws = []
    with tempfile.TemporaryDirectory() as tmp:
        run(tmp + "/warmup", False)
        for k in range(args.repeats):
            for listen in (False, True):
                elapsed, count = run(f"{tmp}/{k}{int(listen)}", listen)
                times[listen].append(elapsed)
                if listen:
                    redraws.append(count)
    stats = {("with" if listen else "without"): {"min_s": min(t), "median_s": statistics.median(t),
                                                 "max_s": max(t)} for listen, t in times.items()}
    ratio = stats["with"]["median_s"] / stats["without"]["median_s"]
    result = {"header": head, "steps": STEPS, "scalars_per_step": 3,
              "repeats": args.repeats, "loop": stats, "ratio_median": ratio,
              "ratio_min": stats["with"]["min_s"] / stats["without"]["min_s"],
              "redraws_per_run": redraws, "unit_costs": unit_costs()}
    print(f"without {stats['without']['median_s']:.3f} s, with {stats['with']['median_s']:.3f} s "
          f"(ratio {ratio:.3f}); redraws per run {redraws}; {result['unit_costs']}")
    save(result, Path(args.out))


if __name__ == "__main__":
    main()
