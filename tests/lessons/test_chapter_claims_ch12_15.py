"""Chapters 12-15 say what their stored outputs show.

A sentence that states a measured direction (smaller, slower, covers) is checked here
against the output stored beside it, or against the benchmark results the chapter reads,
so a re-run whose numbers turn the other way fails until the prose is changed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "benchmarks" / "results"


def notebook(name: str) -> dict[str, nbformat.NotebookNode]:
    """The cells of a chapter by cell id."""
    return {c["id"]: c for c in nbformat.read(NOTEBOOKS / name, as_version=4).cells}


def printed(cell: nbformat.NotebookNode) -> str:
    """Everything a code cell printed or displayed as text."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif "data" in output and "text/plain" in output["data"]:
            parts.append(output["data"]["text/plain"])
    return "".join(parts)


def numbers(pattern: str, text: str) -> list[float]:
    """Every number the pattern's groups capture, in order."""
    found = []
    for match in re.finditer(pattern, text):
        found += [float(group) for group in match.groups()]
    return found


# -- chapter 12 -----------------------------------------------------------------------------------

CH12 = "12_instrumentation.ipynb"


def test_ch12_no_generator_is_printed_and_forward_hooks_run_children_first():
    cells = notebook(CH12)
    assert not any("Generator(PCG64)" in printed(c) for c in cells.values() if c.cell_type == "code")
    log = printed(cells["bf986bbd"]).splitlines()
    assert log.index("pre      model") < log.index("pre      0")       # pre-hooks: container first
    assert log.index("forward  2") < log.index("forward  model")    # forward hooks: children first
    assert "children's\nrun first and the container's last" in cells["88d6ed84"].source


def test_ch12_kaiming_against_the_default_initialisation():
    cells = notebook(CH12)
    tiny = printed(cells["9f08d3f6"])
    tiny_norms = numbers(r"step 0 = ([0-9.e+-]+)", tiny)
    assert tiny_norms[3] / tiny_norms[0] > 100                    # "fall by orders of magnitude"
    assert abs(numbers(r"loss after 60 steps: ([0-9.]+)", tiny)[0] - 1.099) < 0.01  # chance level
    kaiming, default = printed(cells["ada38504"]).splitlines()[:2]
    k_loss, d_loss = (numbers(r"loss after 60 steps ([0-9.]+)", line)[0] for line in (kaiming, default))
    k_norms, d_norms = (numbers(r"([0-9.]+e[+-][0-9]+)", line) for line in (kaiming, default))
    assert k_loss < d_loss / 5                                   # "far above Kaiming's"
    assert max(k_norms) / min(k_norms) < 10                      # "of one order of magnitude"
    ratios = [k / d for k, d in zip(k_norms, d_norms)]
    assert all(15 <= r <= 40 for r in ratios), ratios            # "twenty to thirty times smaller"
    assert "U(-1/\\sqrt{n_\\text{in}}" in cells["cab72d9a"].source


def test_ch12_clipping_keeps_units_alive_and_redraws_stay_under_the_limit():
    cells = notebook(CH12)
    dead, clipped = printed(cells["4316410e"]), printed(cells["96782e86"])
    dead_fractions = numbers(r"'\d+': ([0-9.]+)", dead)
    clipped_fractions = numbers(r"'\d+': ([0-9.]+)", clipped)
    assert min(dead_fractions) >= 0.8                            # "a dead fraction near 1"
    assert all(c < d for c, d in zip(clipped_fractions, dead_fractions))
    assert numbers(r"clipping: ([0-9.]+)", clipped)[0] < numbers(r"lr=3.0: ([0-9.]+)", dead)[0]
    for line in printed(cells["dc945a8f"]).splitlines()[1:]:
        redraws, limit = numbers(r"(\d+) redraws \(the limit allows (\d+)", line)
        assert redraws <= limit, line


# -- chapter 13 -----------------------------------------------------------------------------------

CH13 = "13_hyperparameter_search.ipynb"


def test_ch13_budgets_compared_as_the_prose_says():
    cells = notebook(CH13)
    summaries = printed(cells["60750d85"])
    hb_trials, rs_trials = numbers(r"(\d+) trials", summaries)
    hb_budget, rs_budget = numbers(r"total budget (\d+)", summaries)
    prose = cells["5e38b97d"].source
    assert f"({hb_trials:.0f} against {rs_trials:.0f} above)" in prose
    assert f"({hb_budget:.0f} units against {rs_budget:.0f}" in prose
    assert hb_budget > rs_budget and hb_trials > rs_trials
    assert "comparable budget" not in prose


def test_ch13_random_learning_rates_all_differ_and_rankings_hold():
    cells = notebook(CH13)
    grid, random = printed(cells["a6c8acba"]).splitlines()
    shown = re.search(r"\[(.*)\]", random).group(1).split(", ")
    assert len(set(shown)) == len(shown) == 9 and "9 different" in random
    losses = [numbers(r"([0-9.]+)", line.split("27:")[1]) for line in
              printed(cells["7d8f0670"]).splitlines()]
    order_first = sorted(range(3), key=lambda i: losses[i][0])
    order_last = sorted(range(3), key=lambda i: losses[i][-1])
    assert order_first == order_last                             # small budgets already rank
    assert not any("Generator(PCG64)" in printed(c) for c in cells.values() if c.cell_type == "code")


# -- chapter 14 -----------------------------------------------------------------------------------

CH14 = "14_data_parallelism.ipynb"


def test_ch14_ring_against_mpi_as_the_prose_says():
    recorded = json.loads((RESULTS / "allreduce.json").read_text())
    two = recorded["runs"]["2"]["rows"]
    small = two[0]
    assert small["floats"] == 1000 and 1.5 < small["ratio_ring_over_mpi"] < 2.6  # "about 2x"
    assert all(row["ratio_ring_over_mpi"] <= 1.05 for row in two if row["floats"] >= 10**6)
    three = recorded["runs"]["3"]["rows"]
    assert all(row["model_ring_s"] < row["ring_s"]["median"] for row in three)  # underestimates


def test_ch14_scaling_figures_as_the_prose_says():
    scaling = json.loads((RESULTS / "ddp_scaling.json").read_text())
    efficiency = scaling["efficiency"]
    strong, weak = efficiency["strong_same_global_batch"], efficiency["weak_same_per_rank_batch"]
    assert 0.35 < strong < 0.65                                  # "eats half the gain"
    assert weak > strong                                         # "compute hides more of it"
    assert 0.012 < scaling["step_s"]["single-128"]["median"] < 0.022  # "about 17 ms"
    prose = notebook(CH14)["486f4d71"].source
    assert "quiet moment" not in prose


def test_ch14_straggler_and_sync_batch_norm_outputs():
    cells = notebook(CH14)
    picture = cells["a91fdf0e"].outputs[0]["data"]["image/svg+xml"]
    per_rank = numbers(r"compute ([0-9.]+) ms, comm ([0-9.]+) ms", picture)
    shares = [comm / (compute + comm) for compute, comm in zip(per_rank[::2], per_rank[1::2])]
    assert shares[0] > shares[1], shares                         # rank 0 waits for rank 1
    synced = printed(cells["f2238171"])
    combined = numbers(r"mean ([0-9.-]+), variance ([0-9.]+)", synced.split("combined")[1])
    assert combined == numbers(r"values: ([0-9.-]+), ([0-9.]+)", synced)
    assert "all-gather" in cells["962d2d36"].source and "all-reduces the per-rank sums" not in \
        cells["962d2d36"].source
    assert '"..")' not in "".join(c.source for c in cells.values())


# -- chapter 15 -----------------------------------------------------------------------------------

CH15 = "15_the_ecosystem.ipynb"


def test_ch15_multiply_adds_and_batch_growth():
    cells = notebook(CH15)
    shapes = [tuple(int(v) for v in m) for m in
              re.findall(r"weight'\s+shape \[(\d+), (\d+)\]", printed(cells["1ed5d5b4"]))]
    multiply_adds = sum(out * inp for out, inp in shapes)
    assert f"{multiply_adds:,} multiply-adds" in cells["62685388"].source
    assert "256-fold" in cells["62685388"].source and "hundredfold" not in cells["62685388"].source
    ran = printed(cells["d03f381a"])
    assert "below 1e-4: True" in ran and "same predictions: True" in ran and "FusedGemm" in ran
    assert "1e-5" not in cells["70a21ee6"].source


@pytest.mark.parametrize("wrong", ["no autograd", "DirectML, ROCm and others"])
def test_ch15_runtime_facts(wrong):
    text = "".join(c.source for c in notebook(CH15).values() if c.cell_type == "markdown")
    assert wrong not in text
