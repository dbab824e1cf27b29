"""ThreadMap, TileView and RaceView draw data recorded from real kernel launches
(in numba's CUDA simulator here; small sizes, the simulator runs one OS thread per
CUDA thread)."""
import re

import numpy as np
import pytest

from teachgrad.widgets import RaceView, ThreadMap, TileView
from teachgrad.widgets.thread_map import owner_colours


def cells_with(svg: str, title_pattern: str) -> list[str]:
    return re.findall(rf"<title>({title_pattern})</title>", svg)


# -- ThreadMap ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n, blocks, threads", [(40, 2, 8), (10, 2, 16), (16, 2, 8)])
def test_thread_map_owners_match_the_grid_stride_formula(n, blocks, threads):
    view = ThreadMap(n=n, blocks=blocks, threads_per_block=threads)
    record, total = view.record, blocks * threads
    i = np.arange(n)
    np.testing.assert_array_equal(record.block * threads + record.thread, i % total)
    np.testing.assert_array_equal(record.block, (i % total) // threads)
    np.testing.assert_array_equal(record.pass_, i // total)
    # the picture puts each element in its recorded thread's column and pass's row
    svg = view.to_svg()
    assert len(cells_with(svg, r"element \d+: block \d+, thread \d+, pass \d+")) == n
    for k in (0, n - 1):
        assert f"element {k}: block {record.block[k]}, thread {record.thread[k]}, " \
               f"pass {record.pass_[k]}" in svg
    idle = len(cells_with(svg, r"thread \d+: idle on pass \d+"))
    assert idle == max(record.passes, 1) * total - n


def test_thread_map_sliders_relaunch_and_describe_both_cases():
    view = ThreadMap(n=40, blocks=2, threads_per_block=8)
    assert view.record.passes == 3
    assert "Fewer threads than elements" in view.summary.value
    assert "8 thread(s) have nothing left on the last pass" in view.summary.value
    view.n_slider.value = 10
    view.threads_slider.value = 16
    assert (view.record.n, view.record.threads_per_block, view.record.passes) == (10, 16, 1)
    assert "More threads than elements: 22 thread(s) find no element" in view.summary.value
    assert "Matches the grid-stride formula (thread = i mod 32, pass = i div 32): yes" \
        in view.summary.value
    assert "CUDA simulator" in view.summary.value or "NVIDIA" in view.summary.value


def test_thread_map_colours_follow_the_recorded_owner():
    view = ThreadMap(n=20, blocks=2, threads_per_block=4)
    by_block = owner_colours(view.record, "block")
    assert len(set(by_block)) == 2  # two blocks, two colours
    by_pass = owner_colours(view.record, "pass")
    assert by_pass[0] == by_pass[7] != by_pass[8]  # elements 0..7 are pass 0, 8 starts pass 1
    svg_before = view.to_svg()
    view.colour_picker.value = "thread"
    assert view.to_svg() != svg_before
    with pytest.raises(ValueError, match="colour_by must be 'block', 'thread' or 'pass'"):
        owner_colours(view.record, "warp")


# -- TileView ----------------------------------------------------------------------------------
def test_tile_view_steps_through_load_barrier_multiply_barrier():
    view = TileView(M=6, K=10, N=7, tile=4, out_tile=(1, 1))
    record = view.record
    assert record.phases == 3 and len(record.steps) == 12
    kinds = []
    while True:
        kinds.append(re.search(r'data-kind="(\w+)"', view.caption.value).group(1))
        if view.next_button.disabled:
            break
        view.next_button.click()
    assert kinds == ["load", "barrier", "multiply", "barrier"] * 3
    assert view.step == 11
    view.back_button.click()
    assert view.step == 10 and not view.next_button.disabled


def test_tile_view_shows_which_thread_loaded_which_element():
    view = TileView(M=6, K=10, N=7, tile=4, out_tile=(1, 1))
    record = view.record
    svg = view.to_svg()  # phase 0, load: rows 4..5 of A, columns 4..6 of B
    for ty in range(4):
        for tx in range(4):
            row, k = record.a_loads[0, ty, tx]
            expected = f"A{row},{k}" if row >= 0 else "0"
            assert (row, k) == ((4 + ty, tx) if ty < 2 else (-1, -1))  # past M=6: zeros
            assert f">{expected}<" in svg
    assert ">B3,6<" in svg and ">B3,7<" not in svg  # column 7 is past N=7
    view.step_slider.value = 1
    assert "syncthreads(): all wait" in view.to_svg()
    view.step_slider.value = 2
    view.thread_picker.value = (1, 2)
    assert "thread (1, 2): C[5, 6] += a_tile row 1 · b_tile column 2" in view.to_svg()


def test_tile_view_counts_come_from_the_kernels():
    view = TileView(M=6, K=10, N=7, tile=4)
    counts, naive = view.record.counts, view.record.naive_counts
    assert naive["global_reads"] == 2 * 6 * 7 * 10
    assert counts["global_reads"] == 2 * 6 * 10 + 2 * 10 * 7  # ceil(7/4)*M*K + ceil(6/4)*K*N
    assert f"<td align='right'>{counts['global_reads']}</td>" in view.traffic.value
    assert "3.2× less" in view.traffic.value
    with pytest.raises(ValueError, match="out_tile \\(2, 0\\) is outside the grid"):
        TileView(M=6, K=10, N=7, tile=4, out_tile=(2, 0))


# -- RaceView ----------------------------------------------------------------------------------
def test_race_view_passes_the_kernel_with_its_barrier():
    view = RaceView(threads=8, blocks=2)
    assert view.report.ok
    assert 'data-races="0"' in view.verdict.value and "No races" in view.verdict.value
    assert 'data-race="true"' not in view.to_svg()
    assert "the same." in view.answer.value


def test_race_view_flags_the_missing_barrier_with_cells_and_threads():
    view = RaceView(threads=8, blocks=2)
    view.barrier_toggle.value = False
    report = view.report
    assert not report.ok
    assert report.offending_indices == {"partial": [(1,), (2,), (3,)]}
    assert f'data-races="{len(report.races)}"' in view.verdict.value
    assert "Offending cells: partial: [1], [2], [3]" in view.verdict.value
    # thread 1 wrote partial[1] while thread 0 read it, between the same two barriers
    assert "partial[1]" in view.verdict.value
    race = next(r for r in report.races if r.index == (1,) and r.block == (0, 0, 0))
    assert race.writers == ((1, 0, 0),) and race.readers == ((0, 0, 0),)
    svg = view.to_svg()
    assert svg.count('data-race="true"') == sum(r.block == (0, 0, 0) for r in report.races) == 3
    view.block_picker.value = 1
    assert view.to_svg().count('data-race="true"') == 3
    view.barrier_toggle.value = True
    assert view.report.ok


def test_race_view_checks_any_kernel():
    from teachgrad.kernels.race import block_sum_kernel

    x, out = np.arange(8, dtype=np.float64), np.zeros(1)
    view = RaceView.check(block_sum_kernel(8, False), 1, 8, x, out)
    assert not view.report.ok and view.barrier_toggle.disabled
    assert "image/svg+xml" in view._repr_mimebundle_()
