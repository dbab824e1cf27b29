"""Exercise 14.3, the ring all-reduce: wrong rings are told what is wrong, on the simulated
ranks (sums, messages, deadlocks) and before anything runs (what cannot travel to the ranks).

The wrong answers are written in a module of their own (``ring_answers``, below) so that
their source can be read, as a notebook cell's can: the checker sends that source to the
ranks.
"""
from __future__ import annotations

import linecache
import time

import numpy as np
import pytest

from teachgrad.distributed import p2p, shipping
from teachgrad.exercises import ch14
from teachgrad.exercises.simulated_ranks import Deadlock, run_ranks

ANSWERS = '''
import numpy as np


def reference(data, comm):
    rank, p = comm.Get_rank(), comm.Get_size()
    bounds = chunk_bounds(data.size, p)
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(p - 1):
            s0, s1 = bounds[send_chunk(phase, step, rank, p)]
            r0, r1 = bounds[recv_chunk(phase, step, rank, p)]
            incoming = np.empty(r1 - r0, dtype=data.dtype)
            comm.Sendrecv(data[s0:s1], dest=(rank + 1) % p, recvbuf=incoming,
                          source=(rank - 1) % p)
            if phase == "reduce-scatter":
                data[r0:r1] += incoming
            else:
                data[r0:r1] = incoming


def gather_to_rank_0(data, comm):
    rank, p = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        incoming = np.empty_like(data)
        for other in range(1, p):
            comm.Irecv(incoming, source=other).Wait()
            data += incoming
        for other in range(1, p):
            comm.Isend(data, dest=other).Wait()
    else:
        comm.Isend(data, dest=0).Wait()
        comm.Irecv(data, source=0).Wait()


def all_to_all(data, comm):
    rank, p = comm.Get_rank(), comm.Get_size()
    total = data.copy()
    for other in range(p):
        if other != rank:
            comm.Isend(data, dest=other)
    for other in range(p):
        if other != rank:
            incoming = np.empty_like(data)
            comm.Irecv(incoming, source=other).Wait()
            total += incoming
    data[:] = total


def direct_exchange(data, comm):
    rank, p = comm.Get_rank(), comm.Get_size()
    bounds = chunk_bounds(data.size, p)
    mine = slice(*bounds[rank])
    for other in range(p):                      # chunk k goes straight to rank k
        if other != rank:
            comm.Isend(data[slice(*bounds[other])], dest=other)
    for other in range(p):
        if other != rank:
            incoming = np.empty(mine.stop - mine.start, dtype=data.dtype)
            comm.Irecv(incoming, source=other).Wait()
            data[mine] += incoming
    for other in range(p):                      # then every finished chunk to everyone
        if other != rank:
            comm.Isend(data[mine], dest=other)
    for other in range(p):
        if other != rank:
            theirs = slice(*bounds[other])
            incoming = np.empty(theirs.stop - theirs.start, dtype=data.dtype)
            comm.Irecv(incoming, source=other).Wait()
            data[theirs] = incoming


def whole_array_round_the_ring(data, comm):
    rank, p = comm.Get_rank(), comm.Get_size()
    passing, total = data.copy(), data.copy()
    for step in range(p - 1):
        incoming = np.empty_like(data)
        comm.Sendrecv(passing, dest=(rank + 1) % p, recvbuf=incoming, source=(rank - 1) % p)
        total += incoming
        passing = incoming
    data[:] = total





def library_allreduce(data, comm):
    comm.Allreduce(MPI.IN_PLACE, data)


def returns_a_copy(data, comm):
    total = data.copy()
    for other in range(comm.Get_size()):
        if other != comm.Get_rank():
            comm.Isend(data, dest=other)
    return total


def uses_the_notebooks_tg(data, comm):
    return tg.tensor(data)



def crashes(data, comm):
    chunk = data.size // (comm.Get_size() - 3)   # the learner's line
    return None


def stub(data, comm):
    raise NotImplementedError("fill in")
'''

SENDRECV = """            comm.Sendrecv(data[s0:s1], dest=(rank + 1) % p, recvbuf=incoming,
                          source=(rank - 1) % p)
"""
#: Variants of the reference: (name, the text replaced, what replaces it)
VARIANTS = [
    ("with_isend_irecv", SENDRECV,
     "            MPI.Request.Waitall([comm.Irecv(incoming, source=(rank - 1) % p),\n"
     "                                 comm.Isend(data[s0:s1], dest=(rank + 1) % p)])\n"),
    ("adds_in_the_all_gather", "data[r0:r1] = incoming", "data[r0:r1] += incoming"),
    ("no_all_gather", '("reduce-scatter", "all-gather")', '("reduce-scatter",)'),
    ("receives_first", SENDRECV,
     "            comm.Irecv(incoming, source=(rank - 1) % p).Wait()\n"
     "            comm.Isend(data[s0:s1], dest=(rank + 1) % p).Wait()\n"),
    ("float32_buffer", "dtype=data.dtype", "dtype=np.float32"),
    ("equal_chunks_only", "bounds = chunk_bounds(data.size, p)",
     "bounds = [(k * (data.size // p), (k + 1) * (data.size // p)) for k in range(p)]"),
]


def _variant(name: str, old: str, new: str) -> str:
    reference = ANSWERS[ANSWERS.index("def reference("):ANSWERS.index("def gather_to_rank_0(")]
    assert old in reference, name
    return "\n" + reference.replace("def reference(", f"def {name}(").replace(old, new)


ANSWERS += "".join(_variant(*variant) for variant in VARIANTS)
FILENAME = "<ring answers>"
linecache.cache[FILENAME] = (len(ANSWERS), None, ANSWERS.splitlines(True), FILENAME)
answers: dict = {"tg": object()}
exec(compile(ANSWERS, FILENAME, "exec"), answers)


def feedback(name: str):
    return ch14.check_ring_all_reduce(answers[name])


def wrong(name: str, *words: str) -> str:
    result = feedback(name)
    assert result.status in ("wrong", "error") and not result.passed, result.message
    for word in words:
        assert word in result.message, result.message
    return result.message


def test_the_reference_ring_and_one_with_isend_irecv_pass_in_under_a_minute():
    start = time.perf_counter()
    assert feedback("reference").passed
    assert time.perf_counter() - start < 60
    assert feedback("with_isend_irecv").passed


def test_the_stub_is_not_solved_yet():
    assert feedback("stub").status == "not solved yet"


@pytest.mark.parametrize("name, words", [
    ("gather_to_rank_0", ["rank 0 sent a message of 6 values", "at most 2", "one chunk"]),
    ("all_to_all", ["rank 0 sent a message of 6 values"]),
    ("direct_exchange", ["not a ring: rank ", "which is not its neighbour (4 ranks)",
                         "(rank + 1) % p"]),
    ("whole_array_round_the_ring", ["a message of 6 values", "chunk_bounds"]),
    ("adds_in_the_all_gather", ["wrong values", "copy it (data[a:b] = incoming)"]),
    ("no_all_gather", ["wrong values", "one finished chunk only"]),
    ("receives_first", ["deadlock: rank ", "waited for a message from rank",
                        "that never came", "Sendrecv does both"]),
    ("library_allreduce", ["your ring called comm.Allreduce", "point-to-point messages",
                           "Get_rank, Get_size, Sendrecv, Isend, Irecv"]),
    ("returns_a_copy", ["returned ndarray", "in place"]),
    ("float32_buffer", []),
    ("equal_chunks_only", ["wrong values", "4 simulated ranks, 10 float32 values (chunks of "
                           "3, 3, 2, 2)"]),
    ("uses_the_notebooks_tg", ["cannot be sent to the ranks", "uses tg, which the ranks will "
                               "not have", "MPI, chunk_bounds, math, np, recv_chunk, send_chunk"]),
])
def test_wrong_rings_are_told_what_is_wrong(name, words):
    wrong(name, *words)


def test_a_float32_receive_buffer_for_float64_data_is_named():
    message = wrong("float32_buffer")
    assert "into a float32 buffer" in message or "float32" in message, message


def test_an_exception_in_the_ring_is_reported_with_its_line():
    message = wrong("crashes", "ZeroDivisionError")
    assert "the learner's line" in message, message


def test_functions_that_cannot_travel_to_the_ranks_are_refused_before_running():
    def inner(data, comm):
        return None

    scale = 2.0
    refused = [(lambda data, comm: None, "lambda"),
               (inner, "top level"),
               (np.add, "written with def")]
    for fn, words in refused:
        with pytest.raises(shipping.ShippingError, match=words):
            shipping.ship(fn, p2p.ring_namespace())
    result = ch14.check_ring_all_reduce(inner)
    assert "cannot be sent to the ranks" in result.message and not result.passed
    assert scale  # (a closure would capture it: inner does not)


def test_simulated_ranks_see_a_deadlock_at_once_and_name_who_waited():
    def everyone_receives(data, comm):
        data[:] = 0
        comm.Irecv(data, source=(comm.Get_rank() + 1) % comm.Get_size()).Wait()

    start = time.perf_counter()
    with pytest.raises(Deadlock, match="rank . waited for a message from rank . that never "
                                       "came"):
        run_ranks(everyone_receives, [np.ones(3) for _ in range(3)], timeout=30)
    assert time.perf_counter() - start < 5  # seen when it happens, not at the timeout


def test_simulated_receives_match_in_the_order_they_were_posted():
    def two_messages(data, comm):
        if comm.Get_rank() == 0:
            comm.Isend(np.array([1.0]), dest=1)
            comm.Isend(np.array([2.0]), dest=1)
        else:
            first, second = np.empty(1), np.empty(1)
            a, b = comm.Irecv(first, source=0), comm.Irecv(second, source=0)
            b.Wait()
            a.Wait()
            data[:] = [first[0], second[0]]

    world, _ = None, None
    datas = [np.zeros(2), np.zeros(2)]
    world, _ = run_ranks(two_messages, datas)
    assert datas[1].tolist() == [1.0, 2.0]
    assert [m.data.tolist() for m in world.sent_by(0)] == [[1.0], [2.0]]
