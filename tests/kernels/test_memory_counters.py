"""tg.cuda's memory counters, against what torch.cuda documents.

``memory_allocated`` grows by a tensor's bytes rounded up to 512 when the tensor is
made and shrinks by the same when it dies; ``max_memory_allocated`` keeps the peak
until ``reset_peak_memory_stats``; ``memory_reserved`` also counts freed blocks the
allocator keeps, until ``empty_cache``; a freed block serves the next request of its size.
"""
import gc

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.kernels.caching_allocator import ROUND_BYTES, block_of, rounded_size
from teachgrad.streams import blocking_launches


@pytest.fixture(autouse=True)
def _settled():
    """Each test starts with no queued work, no garbage and an empty cache."""
    with blocking_launches():
        tg.cuda.synchronize()
        gc.collect()
        tg.cuda.empty_cache()
        tg.cuda.reset_peak_memory_stats()
        yield


@pytest.mark.parametrize("n, dtype, expected", [
    (1, np.float32, 512), (128, np.float32, 512), (129, np.float32, 1024),
    (1000, np.float64, 8192), (3, np.int64, 512)])
def test_allocated_grows_by_the_rounded_bytes_and_falls_when_the_tensor_dies(n, dtype, expected):
    before = tg.cuda.memory_allocated()
    x = tg.tensor(np.ones(n, dtype=dtype), device="cuda")
    grown = tg.cuda.memory_allocated() - before
    assert grown == expected == rounded_size(x.numel() * x.element_size())
    del x
    assert tg.cuda.memory_allocated() == before


def test_rounding_is_to_512_byte_blocks_and_empty_tensors_take_nothing():
    assert ROUND_BYTES == 512
    assert [rounded_size(b) for b in (0, 1, 511, 512, 513, 1024, 1025)] == [0, 512, 512, 512,
                                                                           1024, 1024, 1536]
    before = tg.cuda.memory_allocated()
    empty = tg.zeros(0, 3, device="cuda")
    assert empty.shape == (0, 3) and tg.cuda.memory_allocated() == before


def test_the_peak_stays_after_the_tensor_dies_until_reset():
    base = tg.cuda.memory_allocated()
    big = tg.zeros(1000, device="cuda")  # 4000 bytes -> 4096
    assert tg.cuda.max_memory_allocated() == base + 4096
    del big
    assert tg.cuda.memory_allocated() == base
    assert tg.cuda.max_memory_allocated() == base + 4096
    tg.cuda.reset_peak_memory_stats()
    assert tg.cuda.max_memory_allocated() == base


@pytest.mark.skipif(not tg.cuda.is_simulated(), reason="on a GPU numba allocates: no cache")
def test_reserved_keeps_freed_blocks_until_empty_cache_and_reuses_them():
    reserved = tg.cuda.memory_reserved()
    x = tg.zeros(1000, device="cuda")
    block = block_of(x._array.buffer)
    assert tg.cuda.memory_reserved() == reserved + 4096
    del x
    assert tg.cuda.memory_reserved() == reserved + 4096  # freed, but cached
    y = tg.ones(1000, device="cuda")  # the same rounded size: the cached block again
    assert block_of(y._array.buffer) is block
    assert tg.cuda.memory_reserved() == reserved + 4096
    np.testing.assert_array_equal(y.cpu().numpy(), np.ones(1000, dtype=np.float32))
    del y
    tg.cuda.empty_cache()
    assert tg.cuda.memory_reserved() == reserved
    assert tg.cuda.max_memory_reserved() >= reserved + 4096


def test_a_view_keeps_the_block_alive_after_its_base_dies():
    base = tg.cuda.memory_allocated()
    x = tg.arange(256.0, device="cuda")
    view = x[10:20]
    del x
    assert tg.cuda.memory_allocated() == base + 1024
    np.testing.assert_array_equal(view.cpu().numpy(), np.arange(10.0, 20.0, dtype=np.float32))
    del view
    assert tg.cuda.memory_allocated() == base


def test_an_operation_counts_its_output_and_frees_its_temporaries():
    a = tg.ones(300, device="cuda")
    b = tg.ones(300, device="cuda")
    tg.cuda.reset_peak_memory_stats()
    before = tg.cuda.memory_allocated()
    c = (a + b).sum()
    assert tg.cuda.memory_allocated() - before == 512  # only the scalar result is left
    assert tg.cuda.max_memory_allocated() - before >= 2048  # a + b (1200 bytes) was alive once
    assert c.item() == 600.0


def test_memory_stats_uses_pytorchs_names_and_they_agree():
    x = tg.zeros(200, device="cuda")  # 800 bytes requested, 1024 allocated
    stats = tg.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == tg.cuda.memory_allocated()
    assert stats["allocated_bytes.all.peak"] == tg.cuda.max_memory_allocated()
    assert stats["reserved_bytes.all.current"] == tg.cuda.memory_reserved()
    assert stats["allocated_bytes.all.allocated"] - stats["allocated_bytes.all.freed"] == \
        stats["allocated_bytes.all.current"]
    assert stats["requested_bytes.all.current"] <= stats["allocated_bytes.all.current"]
    assert stats["allocation.all.current"] >= 1
    del x


def test_freed_when_the_queued_kernels_have_run():
    with blocking_launches(False):
        before = tg.cuda.memory_allocated()
        x = tg.ones(1000, device="cuda") * 3
        del x
        tg.cuda.synchronize()
        assert tg.cuda.memory_allocated() == before


def test_the_summary_shows_the_counters():
    x = tg.zeros(1000, device="cuda")
    text = tg.cuda.memory_summary()
    assert "Allocated memory" in text and "Reserved memory" in text
    current = tg.cuda.memory_allocated()
    assert f"{current / 1024:.1f} KiB" in text.splitlines()[5]
    del x


@pytest.mark.parametrize("device", [0, "cuda", "cuda:0", None])
def test_the_device_argument(device):
    assert tg.cuda.memory_allocated(device) == tg.cuda.memory_allocated()


@pytest.mark.parametrize("device, match", [
    ("cpu", "cuda devices"), (-1, "device index"), (5, "does not exist"), ("cuda:x", "bad device"),
    (1.5, "cuda devices")])
def test_a_bad_device_is_refused(device, match):
    with pytest.raises(ValueError, match=match):
        tg.cuda.memory_allocated(device)
