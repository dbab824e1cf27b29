"""OnlineSoftmaxView draws one row of the tiled attention kernel, recorded by the kernel."""
import re

import numpy as np
import pytest

from teachgrad.widgets import OnlineSoftmaxView


def titles(svg: str, pattern: str) -> list[str]:
    return re.findall(rf"<title>({pattern})</title>", svg)


def test_steps_through_the_visited_tiles():
    view = OnlineSoftmaxView(T=13, S=21, head_dim=4, block_q=4, block_k=4, row=12, seed=3)
    record = view.record
    assert record.visited == 6 and view.step_slider.max == 5
    seen = []
    while True:
        seen.append(int(re.search(r'data-step="(\d+)"', view.caption.value).group(1)))
        if view.next_button.disabled:
            break
        view.next_button.click()
    assert seen == list(range(6))
    view.back_button.click()
    assert view.step == 4 and not view.next_button.disabled
    assert "tile 5 of 6" in view.caption.value and record.steps[4] in view.caption.value


def test_picture_and_table_show_the_recorded_state():
    view = OnlineSoftmaxView(T=13, S=21, row=12, seed=3)
    record = view.record
    view.step_slider.value = 2
    svg = view.to_svg()
    assert len(titles(svg, r"key \d+: score [-\d.]+")) == 21  # every key scored, none masked
    # the filled weights are those of keys 0..11 (tiles 0..2), read from the recorded m and l
    filled = titles(svg, r"key \d+: weight now [\d.]+")
    assert len(filled) == 12
    m, l = record.state[2, 1], record.state[2, 2]
    w = np.exp(record.scores[5].astype(np.float64) - m) / l
    assert f"key 5: weight now {w:.3f}" in svg
    assert f"m = {m:.3g}" in svg
    assert "font-weight:bold" in view.table.value.split("<tr")[4]  # row of tile 2
    assert f"{record.state[2, 3]:.4g}" in view.table.value
    view.step_slider.value = 5
    final = titles(view.to_svg(), r"key \d+: weight now [\d.]+")
    exact = record.final_weights()
    for text in final:
        key, value = re.match(r"key (\d+): weight now ([\d.]+)", text).groups()
        assert float(value) == pytest.approx(exact[int(key)], abs=1e-3)


def test_causal_row_marks_masked_keys_and_skipped_tiles():
    view = OnlineSoftmaxView(T=13, S=21, block_q=4, block_k=4, causal=True, row=5)
    svg = view.to_svg()
    assert view.record.visited == 2 and view.step_slider.max == 1
    assert "tiles 2..5: skipped (causal)" in svg
    assert svg.count(">×<") == 2  # keys 6 and 7 lie right of row 5 in a visited tile
    assert len(titles(svg, r"key \d+: score [-\d.]+")) == 6
    assert "causal skips them" in view.record.steps[-1]
