"""Sentences in chapters 10 and 11 that state a measured direction hold in the stored output
beside them (the rule: a direction is checked against the stored output, or worded as what
the reader will see on their own machine)."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def stored_text(notebook: str, cell_id: str) -> str:
    nb = nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4)
    [cell] = [c for c in nb.cells if c.get("id") == cell_id]
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def prose(notebook: str, cell_id: str) -> str:
    nb = nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4)
    [cell] = [c for c in nb.cells if c.get("id") == cell_id]
    return " ".join(cell.source.split())


def timings(text: str) -> dict[str, tuple[float, float]]:
    """``name: 1.23 s wall, 0.98 s CPU, CPU/wall 0.80`` lines -> {name: (wall, cpu/wall)}."""
    found = re.findall(r"^\s*(.+?):\s+([\d.]+) s wall,\s+[\d.]+ s CPU, CPU/wall ([\d.]+)", text, re.M)
    return {name: (float(wall), float(ratio)) for name, wall, ratio in found}


CH10 = "10_asynchronous_execution"


def test_overlap_demo_shows_what_the_prose_says():
    assert "the asynchronous loop finished sooner than the blocking one, with a higher CPU/wall" \
        in prose(CH10, "24a7ce1c")
    measured = timings(stored_text(CH10, "6efa1b04"))
    (async_wall, async_ratio), (blocking_wall, blocking_ratio) = \
        measured["asynchronous"], measured["blocking"]
    assert async_wall < 0.9 * blocking_wall, measured  # sooner, by more than noise
    assert async_ratio > blocking_ratio, measured


def test_item_in_the_loop_is_slower_in_the_stored_run():
    assert "The easiest way to lose all of this is to read a value inside the loop" \
        in prose(CH10, "e908e4a5")
    measured = timings(stored_text(CH10, "415adb7a"))
    assert measured[".item() in the loop"][0] > 1.1 * measured["one read after the loop"][0], measured


@pytest.mark.parametrize("cell_id, unit", [("b9b322ed", "ms"), ("b2326f86", "µs")])
def test_compiled_is_faster_in_the_stored_runs_of_chapter_11(cell_id, unit):
    text = stored_text("11_static_graphs_and_compilers", cell_id)
    eager, compiled = map(float, re.search(rf"eager ([\d.]+) {unit}, compiled ([\d.]+) {unit}",
                                           text).groups())
    assert compiled < eager, text


def test_the_queue_fills_up_in_the_stored_run():
    assert "the host is quick, so the queue fills up" in prose(CH10, "5262fe6e")
    text = stored_text(CH10, "fc9fb24d")
    queued = int(re.search(r"ops still in flight when the host had enqueued all 40: (\d+)",
                           text).group(1))
    assert queued >= 30, text
