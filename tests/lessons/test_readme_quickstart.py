"""The README's quick start runs as printed and does what its comments say."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start_code() -> str:
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_quick_start_runs_and_trains():
    result = subprocess.run([sys.executable, "-c", quick_start_code()],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "tensor([2., 4., 6.])"
    loss = float(re.fullmatch(r"loss after training: (\S+)", lines[1]).group(1))
    assert loss < 0.05  # y is an exact linear function of X: the net fits it
    assert lines[2].startswith("tensor([") and "device='cuda" in lines[2]


def widgets_code() -> str:
    section = README.read_text(encoding="utf-8").split("## What is inside", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_the_widget_examples_in_the_readme_run():
    import textwrap

    import teachgrad as tg

    model = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.ReLU(), tg.nn.Linear(4, 1))
    x = tg.randn(5, 3, requires_grad=True)
    w = tg.randn(3, requires_grad=True)
    loss = (model(x).squeeze(1) * (x @ w)).mean()
    made = {}
    for line in textwrap.dedent(widgets_code()).strip().splitlines():
        if "import" in line or line.startswith(" "):
            continue
        made[line.split("(")[0]] = eval(line.split("#")[0], {  # noqa: S307
            **vars(__import__("teachgrad.widgets", fromlist=["*"])),
            "loss": loss, "x": x, "w": w, "model": model})
    assert set(made) == {"GraphView", "BackpropStepper", "ThreadMap", "TileView",
                         "OnlineSoftmaxView", "RaceView", "SpeedChart"}
    for widget in made.values():
        assert hasattr(widget, "children")
