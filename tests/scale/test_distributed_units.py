"""teachgrad.distributed without starting ranks: the ring's schedule and cost model,
the sampler against PyTorch's shards, argument checks, the launcher's command line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import teachgrad as tg
import teachgrad.distributed as dist
from teachgrad.distributed import launcher as launch_module
from teachgrad.distributed import ring
from teachgrad.nn.parallel import DistributedDataParallel
from teachgrad.utils.data import DistributedSampler

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


# --- the ring ---------------------------------------------------------------------------

def simulate_ring(data: np.ndarray) -> list[np.ndarray]:
    """Play the ring's schedule with numpy: one array per rank, messages copied at each step."""
    p = len(data)
    copies = [row.astype(np.float64).copy() for row in data]
    bounds = ring.chunk_bounds(data.shape[1], p)
    for phase in ring.PHASES:
        for step in range(p - 1):
            sent = {r: copies[r][slice(*bounds[ring.send_chunk(phase, step, r, p)])].copy()
                    for r in range(p)}
            for r in range(p):
                chunk = slice(*bounds[ring.recv_chunk(phase, step, r, p)])
                incoming = sent[(r - 1) % p]
                copies[r][chunk] = copies[r][chunk] + incoming if phase == "reduce-scatter" \
                    else incoming
    return copies


@pytest.mark.parametrize("p, n", [(1, 5), (2, 1), (2, 7), (3, 10), (4, 3), (5, 17), (8, 64)])
def test_the_schedule_leaves_every_rank_with_the_sum(p, n):
    data = np.random.default_rng(p * n).normal(size=(p, n))
    for copy in simulate_ring(data):
        np.testing.assert_allclose(copy, data.sum(axis=0), rtol=1e-12)


def test_after_reduce_scatter_rank_r_owns_chunk_r_plus_1():
    p = 4
    for r in range(p):
        last = ring.send_chunk("reduce-scatter", p - 2, r, p)
        received_last = ring.recv_chunk("reduce-scatter", p - 2, r, p)
        assert received_last == (r + 1) % p  # the final addition completes chunk r+1
        assert ring.send_chunk("all-gather", 0, r, p) == (r + 1) % p  # and it is sent first
        assert last != received_last


def test_schedule_lists_every_rank_step_and_phase():
    steps = ring.ring_schedule(3)
    assert len(steps) == 2 * 2 * 3
    assert steps[0] == ring.RingStep("reduce-scatter", 0, 0, send=0, recv=2)
    for s in steps:  # a rank receives exactly what its left neighbour sends
        left = next(t for t in steps if (t.phase, t.step) == (s.phase, s.step)
                    and t.rank == (s.rank - 1) % 3)
        assert s.recv == left.send
    with pytest.raises(ValueError, match="phase must be one of"):
        ring.send_chunk("broadcast", 0, 0, 2)
    with pytest.raises(ValueError, match="world_size must be at least 1"):
        ring.ring_schedule(0)


def test_chunks_are_as_equal_as_possible_and_cover_everything():
    assert ring.chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert ring.chunk_bounds(2, 3) == [(0, 1), (1, 2), (2, 2)]


def test_cost_model_is_2_p_minus_1_over_p_of_the_data():
    assert ring.bytes_sent_per_rank(4_000_000, 2) == 4_000_000
    assert ring.bytes_sent_per_rank(4_000_000, 4) == 6_000_000
    assert ring.modelled_time(1000, 4, bandwidth=1e9, latency=1e-6) == pytest.approx(
        6e-6 + 1500 / 1e9)


def test_ring_refuses_a_non_contiguous_array():
    with pytest.raises(ValueError, match="1-D contiguous array"):
        ring.ring_all_reduce(np.zeros((3, 4)).T, np.add, comm=None)


# --- the sampler ------------------------------------------------------------------------

def test_sampler_shards_match_pytorch_without_shuffle():
    recorded = json.loads((FIXTURES / "distributed_sampler_torch.json").read_text())["cases"]
    for case in recorded:
        got = [list(DistributedSampler(range(case["n"]), case["num_replicas"], r, shuffle=False,
                                       drop_last=case["drop_last"]))
               for r in range(case["num_replicas"])]
        assert got == case["shards"], case
        assert all(len(DistributedSampler(range(case["n"]), case["num_replicas"], r,
                                          drop_last=case["drop_last"])) == len(shard)
                   for r, shard in enumerate(case["shards"]))


@pytest.mark.parametrize("n, p", [(10, 3), (12, 4), (7, 2)])
def test_shuffled_shards_partition_each_epoch_and_change_with_set_epoch(n, p):
    samplers = [DistributedSampler(range(n), p, r, shuffle=True, seed=5) for r in range(p)]
    epoch0 = [list(s) for s in samplers]
    covered = sorted(i for shard in epoch0 for i in shard)
    assert set(covered) == set(range(n)) and len(covered) == samplers[0].total_size
    assert epoch0 == [list(s) for s in samplers]  # same epoch, same order
    for s in samplers:
        s.set_epoch(1)
    epoch1 = [list(s) for s in samplers]
    assert epoch1 != epoch0
    again = [i for shard in epoch1 for i in shard]
    assert set(again) == set(range(n)) and len(again) == len(covered)


def test_sampler_checks_its_arguments():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(5), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="num_replicas must be a positive int"):
        DistributedSampler(range(5), num_replicas=0, rank=0)
    with pytest.raises(RuntimeError, match="needs num_replicas and rank, or an initialized"):
        DistributedSampler(range(5))


# --- argument checks that need no ranks ---------------------------------------------------

def test_only_the_mpi_backend_exists():
    with pytest.raises(ValueError, match="backend 'nccl' is not available.*Fix"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="allreduce must be one of"):
        dist.init_process_group("mpi", allreduce="tree")
    with pytest.raises(ValueError, match="timeout must be positive"):
        dist.init_process_group("mpi", timeout=0)
    assert not dist.is_initialized()


def test_collectives_and_ddp_need_a_process_group():
    with pytest.raises(RuntimeError, match="call init_process_group"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="call init_process_group"):
        dist.all_reduce(tg.zeros(3))
    with pytest.raises(TypeError, match="expects a teachgrad Tensor, got ndarray"):
        dist.all_reduce(np.zeros(3))
    with pytest.raises(RuntimeError, match="needs a process group"):
        DistributedDataParallel(tg.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="bucket_cap_mb must be positive"):
        DistributedDataParallel(tg.nn.Linear(2, 2), bucket_cap_mb=0)
    with pytest.raises(TypeError, match="wraps an nn.Module"):
        DistributedDataParallel(lambda x: x)


def test_mpiexec_command_with_a_hostfile():
    command = launch_module.mpiexec_command(8, ["train.py", "--lr", "0.1"], hostfile="hosts")
    assert command[0].endswith("mpiexec")
    assert command[1:5] == ["-f", "hosts", "-n", "8"]
    assert command[-3:] == ["train.py", "--lr", "0.1"]
    with pytest.raises(ValueError, match="number of ranks must be a positive int"):
        launch_module.mpiexec_command(0, ["train.py"])
    env = launch_module.rank_environment({"X": "1"})
    assert env["X"] == "1" and "OPENBLAS_NUM_THREADS" in env


def test_launch_checks_its_arguments():
    with pytest.raises(ValueError, match="either a script path or source"):
        dist.launch()
    with pytest.raises(ValueError, match="timeout must be positive"):
        dist.launch(source="pass", timeout=0)
    with pytest.raises(FileNotFoundError, match="no script at"):
        dist.launch("no_such_script.py")


def test_first_failure_prefers_the_rank_that_raised_on_its_own():
    stderr = ["[teachgrad.distributed] rank 0 failed with RankFailedError: rank 2 failed with X",
              "", "Traceback...\n[teachgrad.distributed] rank 2 failed with KeyError: 'x'\n"]
    assert launch_module.first_failure(stderr) == (2, "KeyError: 'x'")
    assert launch_module.first_failure(["", ""]) == (None, "")
