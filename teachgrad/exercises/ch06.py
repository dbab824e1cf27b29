"""Checkers for chapter 6, *The GPU programming model*: grid-stride loops.

Both checkers launch real kernels (numba's CUDA simulator when there is no
GPU), so sizes stay small: a few blocks of at most 32 threads.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .building import property_test
from .core import Feedback, Mismatch, Test, check, expect_true, unseen_rng
from .kernel_runs import first_index, is_stub, launch_on_host_arrays, launch_within_bounds

#: (elements, blocks, threads per block, what the case is about)
SAXPY_CASES = [
    (100, 2, 32, "more elements than threads: each thread makes several passes"),
    (10, 2, 32, "more threads than elements: most threads find nothing to do"),
    (64, 2, 32, "exactly one element per thread"),
    (37, 1, 1, "a single thread does everything"),
    (83, 3, 8, "a ragged size: the last pass is partial"),
]


def check_saxpy(saxpy: Callable) -> Feedback:
    """Exercise 6.1: an in-place grid-stride SAXPY kernel, ``y[i] = a * x[i] + y[i]``.

    Updating ``y`` in place makes every mistake visible: an element nobody
    touched keeps its old value, and one touched twice got ``a * x`` added twice.
    """
    a = 2.0

    def make(n: int, blocks: int, threads: int, about: str) -> Test:
        def run() -> None:
            if is_stub(saxpy):
                raise NotImplementedError
            x = np.arange(1, n + 1, dtype=np.float64)  # never 0, so every update shows
            y = 1000.0 + np.arange(n, dtype=np.float64)
            _, got = launch_on_host_arrays(saxpy, blocks, threads, a, x, y)
            _explain_saxpy(got, x, y, a, blocks * threads)

        return Test(f"n = {n}, launched as saxpy[{blocks}, {threads}] ({about})", run,
                    hint="loop `for i in range(cuda.grid(1), y.size, cuda.gridsize(1))`: "
                         "the range stops by itself at the end of the array")

    rng = unseen_rng()
    unseen = (int(rng.integers(40, 150)), int(rng.integers(1, 4)), int(rng.choice([8, 16, 32])),
              "an unseen size and grid")
    tests = [make(*case) for case in SAXPY_CASES + [unseen]] + [work_spread_test(saxpy)]
    return check("6.1", tests, candidate=saxpy,
                 solved="your kernel covers any number of elements with any grid, "
                        "each element exactly once.")


def work_spread_test(saxpy: Callable, n: int = 45, blocks: int = 2, threads: int = 8) -> Test:
    """Which thread wrote each element, recorded from a launch: the grid-stride pattern?

    A kernel where one thread does everything gives the right numbers, so the
    values alone cannot tell; the recording can. In a grid-stride loop element
    ``i`` belongs to thread ``i % (blocks * threads)``.
    """
    def run() -> None:
        from ..kernels.record import record_accesses

        if is_stub(saxpy):
            raise NotImplementedError
        x = np.arange(1, n + 1, dtype=np.float64)
        record = record_accesses(saxpy, blocks, threads, 2.0, x, np.zeros(n))
        owner = record.owner("y", "W")
        total = blocks * threads
        expected = np.arange(n) % total
        if np.array_equal(owner, expected):
            return
        i = first_index(owner != expected)
        busy = int((record.per_thread("W", "y") > 0).sum())
        who = ("several threads" if owner[i] == -2 else "no thread" if owner[i] == -1
               else f"thread {owner[i]}")
        raise Mismatch(f"element {i} was written by {who}, not by thread {expected[i]}; only "
                       f"{busy} of the {total} threads wrote anything", show_values=False,
                       hint="spread the work: thread g starts at g = cuda.grid(1) and steps by "
                            "cuda.gridsize(1), so every thread of the grid takes its share")

    return Test(f"who wrote each element: n = {n}, saxpy[{blocks}, {threads}], recorded", run)


def _explain_saxpy(got: np.ndarray, x: np.ndarray, y: np.ndarray, a: float,
                   threads_in_grid: int) -> None:
    """Raise a Mismatch that says which element went wrong, and how."""
    expected = a * x + y
    if np.array_equal(got, expected):
        return
    updates = (got - y) / (a * x)  # how many times a*x was added to each element
    if np.all(updates == np.round(updates)):
        untouched = updates == 0
        repeated = updates > 1
        if untouched.any():
            i = first_index(untouched)
            hint = ("each thread must keep going: after element `start` comes "
                    "`start + cuda.gridsize(1)`, and so on until the end")
            if i == threads_in_grid:
                hint = (f"element {i} is the first one past the {threads_in_grid} threads of the "
                        "grid, so one pass per thread is not enough: " + hint)
            raise Mismatch(f"element {i} was never updated", expected[i], got[i], hint)
        if repeated.any():
            i = first_index(repeated)
            raise Mismatch(f"element {i} was updated {int(updates[i])} times instead of once",
                           expected[i], got[i],
                           "two threads handled the same element: start at cuda.grid(1) "
                           "(the thread's global number) and step by cuda.gridsize(1)")
    i = first_index(got != expected)
    raise Mismatch(f"wrong value at element {i}", expected[i], got[i],
                   "the update is y[i] = a * x[i] + y[i], in place")


# -- exercise 6.2: how many passes --------------------------------------------------------

PASSES_CASES = [(20, 2, 4), (5, 2, 4), (64, 2, 32), (100, 2, 32), (7, 1, 3), (9, 3, 3)]


def recorded_passes(n: int, blocks: int, threads_per_block: int) -> np.ndarray:
    """Elements each thread handled, counted from a real launch of teachgrad's grid-stride kernel.

    The kernel records, per element, the block and thread that wrote it; the
    count per global thread number is the number of passes that thread made.
    """
    from ..kernels.record import record_elementwise

    return record_elementwise(n, blocks, threads_per_block).elements_per_thread


def check_passes_per_thread(passes_per_thread: Callable) -> Feedback:
    """Exercise 6.2: ``passes_per_thread(n, blocks, threads_per_block)`` for a grid-stride loop.

    The expected answer is not a formula: it is counted from a real, recorded
    launch of teachgrad's elementwise kernel.
    """
    def make(n: int, blocks: int, threads: int) -> Test:
        def run() -> None:
            got = passes_per_thread(n, blocks, threads)
            expect_true(got is not None, "your function returned None",
                        hint="did you forget a `return`?")
            got = np.asarray(got)
            expected = recorded_passes(n, blocks, threads)
            if got.shape != expected.shape:
                raise Mismatch(f"expected one count per thread ({blocks} x {threads} = "
                               f"{expected.size} threads), got shape {list(got.shape)}",
                               expected, got, "return a list (or array) of length blocks * threads_per_block")
            if np.array_equal(got, expected):
                return
            t = first_index(got != expected)
            if np.all(got == expected.max()):
                hint = ("not every thread makes the same number of passes: on the last pass only "
                        "the first n % (blocks * threads) threads still have an element")
            else:
                hint = ("thread g handles elements g, g + S, g + 2S, ... below n, where "
                        "S = blocks * threads_per_block")
            raise Mismatch(f"wrong number of passes for thread {t} "
                           f"(block {t // threads}, thread {t % threads})", expected, got, hint)

        return Test(f"n = {n} elements, {blocks} blocks of {threads} threads", run)

    rng = unseen_rng()
    unseen = [(int(rng.integers(1, 120)), int(rng.integers(1, 5)), int(rng.integers(1, 17)))
              for _ in range(2)]
    return check("6.2", [make(*case) for case in PASSES_CASES + unseen],
                 candidate=passes_per_thread,
                 solved="your counts match what the threads of a real launch did.")


# -- exercise 6.3: the map kernel the cuda device runs ------------------------------------

#: (elements, blocks, threads per block, what the launch is about); the engine's own
#: launches (``elementwise.launch_config``) are among the shapes these cover.
MAP_LAUNCHES = [
    (100, 2, 32, "fewer threads than elements: several passes"),
    (10, 3, 32, "more blocks than needed: most threads find nothing"),
    (83, 3, 8, "a ragged size: the last pass is partial"),
    (37, 1, 1, "a single thread"),
    (64, 2, 32, "exactly one element per thread"),
]


def _map_functions() -> dict:
    """Scalar device functions the map is built for (the engine's own)."""
    from ..kernels import ops

    return {"tanh": (ops.tanh, np.tanh), "neg": (ops.neg, np.negative),
            "relu": (ops.relu, lambda v: np.maximum(v, 0.0))}


def _launch_map(kernel, n: int, blocks: int, threads: int, values: np.ndarray) -> np.ndarray:
    """``kernel[blocks, threads](out, x)`` with ``out`` filled with NaN; returns ``out``."""
    out, _ = launch_within_bounds(
        kernel, blocks, threads, np.full(n, np.nan), values,
        hint="with more threads than elements, a thread must check i < out.size before it "
             "touches out[i] (a range() loop stops by itself)")
    return out


def check_map_launch(make_map: Callable, n: int, blocks: int, threads: int, name: str = "tanh",
                     seed: int = 0) -> None:
    """``make_map(fn)`` launched as ``[blocks, threads]`` on ``n`` values against numpy;
    a :class:`Mismatch` naming the first wrong element, and why it may be wrong."""
    device_fn, numpy_fn = _map_functions()[name]
    values = np.random.default_rng(seed).normal(size=n) * 3
    got = _launch_map(make_map(device_fn), n, blocks, threads, values)
    expected = numpy_fn(values)
    if np.allclose(got, expected, rtol=1e-12, atol=1e-12):
        return
    i = first_index(~np.isclose(got, expected, rtol=1e-12, atol=1e-12))
    if np.isnan(got[i]):
        hint = (f"element {i} was never written; a grid of {blocks * threads} thread(s) "
                "covers more elements only if each thread keeps going: step by "
                "cuda.gridsize(1)")
    else:
        hint = f"out[i] must be fn(x[i]), the function make_map was given ({name} here)"
    raise Mismatch(f"wrong value at element {i} of make_map({name}) on n = {n}, launched as "
                   f"[{blocks}, {threads}]", expected[i], got[i], hint)


def map_launch_test(make_map: Callable, n: int, blocks: int, threads: int, about: str,
                    name: str = "tanh", seed: int = 0) -> Test:
    def run() -> None:
        if is_stub(make_map):
            raise NotImplementedError
        check_map_launch(make_map, n, blocks, threads, name, seed)

    return Test(f"make_map({name}) on n = {n}, launched as [{blocks}, {threads}] ({about})", run)


def map_property_test(make_map: Callable) -> Test:
    """Sizes, grids and block sizes drawn by hypothesis (odd block sizes too, which the
    engine never launches but a grid-stride loop must not care about)."""
    def strategy(st):
        return st.tuples(st.integers(1, 70), st.integers(1, 4), st.sampled_from([1, 3, 5, 8, 13]),
                         st.sampled_from(sorted(_map_functions())), st.integers(0, 2**16))

    return property_test("make_map(tanh, neg or relu) on 1 to 70 elements, 1 to 4 blocks of 1 to "
                         "13 threads", strategy, lambda case: check_map_launch(make_map, *case),
                         examples=25, shrink=False)


def _negate(value):
    return -value


def map_spread_test(make_map: Callable, n: int = 45, blocks: int = 2, threads: int = 8) -> Test:
    """Who wrote each element of ``out`` in a recorded launch: the grid-stride pattern,
    each element once (one thread doing everything gives the right numbers too)."""
    def run() -> None:
        from ..kernels.record import record_accesses

        if is_stub(make_map):
            raise NotImplementedError
        # (a plain Python function: the simulator replays it on a GPU machine too)
        record = record_accesses(make_map(_negate), blocks, threads, np.zeros(n),
                                 np.arange(1.0, n + 1))
        out = next(iter(record.arrays))  # (the kernel's first parameter, whatever its name)
        writes = record.counts(out, "W")
        if (writes > 1).any():
            i = first_index(writes > 1)
            raise Mismatch(f"element {i} was written {int(writes[i])} times", show_values=False,
                           hint="each element belongs to one thread: start at cuda.grid(1) and "
                                "step by cuda.gridsize(1)")
        owner, expected = record.owner(out, "W"), np.arange(n) % (blocks * threads)
        if not np.array_equal(owner, expected):
            i = first_index(owner != expected)
            busy = int((record.per_thread("W", out) > 0).sum())
            raise Mismatch(f"element {i} was written by thread {owner[i]}, not {expected[i]}; "
                           f"{busy} of the {blocks * threads} threads wrote anything",
                           show_values=False,
                           hint="spread the work: thread g takes g, g + S, g + 2S ... with "
                                "g = cuda.grid(1) and S = cuda.gridsize(1)")

    return Test(f"who wrote each element: n = {n}, [{blocks}, {threads}], recorded", run)


def check_map(make_map: Callable) -> Feedback:
    """Exercise 6.3: ``make_map(fn)`` -> a grid-stride kernel ``(out, x)``, then the ``cuda``
    device's map: plugged into ``cuda.map``, it runs tanh in a small MLP's training."""
    from .kernel_workloads import plugged_training_test

    rng = unseen_rng()
    unseen = (int(rng.integers(40, 150)), int(rng.integers(1, 5)), int(rng.choice([4, 8, 16])),
              "an unseen size and grid")
    tests = [map_launch_test(make_map, *case) for case in MAP_LAUNCHES + [unseen]]
    tests += [map_launch_test(make_map, 29, 2, 8, "another function", "relu", seed=3),
              map_launch_test(make_map, 29, 2, 8, "another function", "neg", seed=4),
              map_spread_test(make_map),
              map_property_test(make_map),
              plugged_training_test("cuda.map", make_map, "map kernel")]
    return check("6.3", tests, candidate=make_map,
                 solved="your grid-stride map is the kernel the cuda device runs for tanh, "
                        "relu, exp ...: the MLP trained on it as on the engine's own.")
