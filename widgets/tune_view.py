"""TuneView: what a successive-halving or Hyperband search did, trial by trial.

Drawn from a :class:`teachgrad.tune.SearchResult` alone: one panel per bracket
with every configuration's loss against budget (log axis), a filled dot where
it was promoted to the next rung, an open dot where it was stopped, a red cross
where it failed; each bracket's rungs as ``n × budget``; and the total budget
spent next to a random search's, when one is given.
"""
from __future__ import annotations

import math
from typing import Any

import ipywidgets as widgets

from teachgrad.tune import SearchResult

from ._chart import Panel
from ._display import StaticSVG
from ._svg import PALETTE, RED, document, rect, text

PANEL_W, PANEL_H, COLUMNS = 250, 190, 3


def _check(result: Any, what: str) -> SearchResult:
    if not isinstance(result, SearchResult):
        raise TypeError(f"TuneView draws a teachgrad.tune.SearchResult as {what}, "
                        f"got {type(result).__name__}")
    return result


class TuneView(StaticSVG, widgets.HTML):
    """Brackets, rungs and trials of a search; ``compare_with`` a random search's result."""

    def __init__(self, result: SearchResult, compare_with: SearchResult | None = None) -> None:
        self.result = _check(result, "result")
        self.baseline = None if compare_with is None else _check(compare_with, "compare_with")
        super().__init__()
        self.value = self.to_svg()

    def brackets(self) -> list[dict]:
        """Per bracket: its rungs (n, budget), trials per config, promoted and stopped counts."""
        out = []
        for k, rungs in enumerate(self.result.schedule):
            trials = [t for t in self.result.trials if t.bracket == k]
            out.append({
                "bracket": k, "rungs": rungs, "trials": len(trials),
                "promoted": sum(t.promoted for t in trials),
                "stopped": sum(t.status == "ok" and not t.promoted and t.rung + 1 < len(rungs)
                               for t in trials),
                "failed": sum(t.status == "failed" for t in trials),
            })
        return out

    def _bracket_panel(self, k: int, x0: float, y0: float) -> list[str]:
        trials = [t for t in self.result.trials if t.bracket == k]
        ok = [t for t in trials if t.status == "ok"]
        budgets = [t.budget for t in trials]
        losses = [t.loss for t in ok]
        panel = Panel.fit(x0, y0, PANEL_W - 60, PANEL_H - 75, budgets, losses, xlog=True,
                          ylog=bool(losses) and min(losses) > 0)
        rungs = self.result.schedule[k] if k < len(self.result.schedule) else []
        body = panel.frame(f"bracket {k}", xlabel="budget", ylabel="loss")
        body.append(text(x0 + (PANEL_W - 60) / 2, y0 + PANEL_H - 38,
                         "rungs: " + ", ".join(f"{n}×{b:g}" for n, b in rungs), size=9))
        by_config: dict[int, list] = {}
        for t in trials:
            by_config.setdefault(t.config_id, []).append(t)
        for cid, path in by_config.items():
            colour = PALETTE[cid % len(PALETTE)]
            good = [t for t in path if t.status == "ok"]
            if len(good) > 1:
                body.append(panel.line([t.budget for t in good], [t.loss for t in good], colour,
                                       width=1))
            for t in path:
                last_rung = t.rung + 1 == len(rungs)
                tip = (f"config {cid} {t.config}: budget {t.budget:g}, loss {t.loss:.4g}, "
                       f"{'failed: ' + t.error if t.status == 'failed' else 'promoted' if t.promoted else 'final' if last_rung else 'stopped'}")
                if t.status == "failed":
                    low = panel.ys[1]  # a failed trial has no loss: drawn at the top
                    body.append(panel.marker(t.budget, low, RED, label=tip, cross=True))
                else:
                    body.append(panel.marker(t.budget, t.loss, colour,
                                             filled=t.promoted or last_rung, label=tip))
        return body

    def _budget_bars(self, y0: float, width: float) -> list[str]:
        rows = [(self.result.method, self.result.total_budget, self.result.best_loss)]
        if self.baseline is not None:
            rows.append((self.baseline.method, self.baseline.total_budget, self.baseline.best_loss))
        top = max(b for _, b, _ in rows) or 1.0
        body = [text(10, y0, "total budget spent", size=12, anchor="start", weight="bold")]
        for i, (name, budget, best) in enumerate(rows):
            y = y0 + 14 + i * 22
            bar = (width - 330) * budget / top
            best_text = "no successful trial" if math.isnan(best) else f"best loss {best:.4g}"
            body.append(text(10, y + 8, name, size=10, anchor="start"))
            body.append(rect(130, y, bar, 16, PALETTE[i], title=f"{name}: {budget:g}"))
            body.append(text(135 + bar, y + 8, f"{budget:g}  ({best_text})", size=10, anchor="start"))
        return body

    def to_svg(self) -> str:
        n = max(len(self.result.schedule), 1)
        columns = min(n, COLUMNS)
        width = max(columns * PANEL_W, 600)
        body = []
        for k in range(len(self.result.schedule)):
            x0, y0 = (k % COLUMNS) * PANEL_W + 50, (k // COLUMNS) * PANEL_H + 25
            body += self._bracket_panel(k, x0, y0)
        y_bars = math.ceil(n / COLUMNS) * PANEL_H + 10
        body += self._budget_bars(y_bars, width)
        legend = ("● promoted or final   ○ stopped   ✕ failed   "
                  f"— {self.result.summary()}")
        body.append(text(10, y_bars + 70, legend[:160], size=9, anchor="start", fill="#555555"))
        return document(width, y_bars + 85, body, kind="tune-view")
