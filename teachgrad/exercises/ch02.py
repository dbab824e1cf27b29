"""Checkers for chapter 2, *Tensors and devices*: broadcasting, work that stays on the device,
and broadcasting backwards (the learner's sum-to-shape, plugged into the engine)."""
from __future__ import annotations

from typing import Callable

import numpy as np

import teachgrad as tg

from .building import plugged_workload, property_test, written_by_the_learner
from .core import (Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy,
                   unseen_rng, watching_ops)


def check_broadcast_shape(broadcast_shape: Callable) -> Feedback:
    """Exercise 2.1: ``broadcast_shape(a, b)`` -> the broadcast shape, or ``ValueError``."""
    pairs = [((3, 1), (1, 4)), ((2, 3), (3,)), ((5, 1, 4), (3, 1)), ((), (2, 2)),
             ((1,), (8, 4, 3)), ((3,), (4,)), ((2, 1), (4, 3)), ((0, 1), (1, 5))]
    pairs += [_random_pair(unseen_rng()) for _ in range(4)]

    def make(a: tuple, b: tuple) -> Test:
        def run() -> None:
            try:
                expected = tuple(np.broadcast_shapes(a, b))
            except ValueError:
                expected = None
            if expected is None:
                try:
                    got = broadcast_shape(a, b)
                except ValueError:
                    return
                raise Mismatch("these shapes cannot broadcast, so a ValueError was expected",
                               "ValueError", got,
                               "two sizes are compatible only if they are equal or one is 1")
            got = broadcast_shape(a, b)
            got_tuple = tuple(got) if isinstance(got, (tuple, list, tg.Size)) else got
            if got_tuple == expected:
                return
            if got_tuple == _left_aligned(a, b):
                hint = "line the shapes up from the right: trailing dimensions are compared first"
            else:
                hint = ("pad the shorter shape with 1s on the left, then take the larger size "
                        "where one of them is 1")
            raise Mismatch("wrong broadcast shape", expected, got, hint)
        return Test(f"shapes {a} and {b}", run,
                    hint="a ValueError is right only when the shapes cannot broadcast")

    return check("2.1", [make(a, b) for a, b in pairs], candidate=broadcast_shape,
                 solved="you broadcast shapes exactly as numpy, PyTorch and teachgrad do.")


def _random_pair(rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Two shapes the learner has not seen: broadcastable, or (one time in three) not."""
    full = tuple(int(v) for v in rng.integers(2, 6, size=int(rng.integers(1, 5))))
    a = tuple(1 if rng.random() < 0.4 else d for d in full)
    b = tuple(1 if rng.random() < 0.4 else d for d in full)[int(rng.integers(0, len(full))):]
    if rng.random() < 0.35 and b:
        b = b[:-1] + (b[-1] + 1 if b[-1] > 1 else 7,)  # a clash in the last dimension
    return a, b


def _left_aligned(a: tuple, b: tuple) -> tuple:
    """What a learner gets by padding on the right instead of the left (a common slip)."""
    n = max(len(a), len(b))
    a2, b2 = a + (1,) * (n - len(a)), b + (1,) * (n - len(b))
    return tuple(max(x, y) for x, y in zip(a2, b2))


def check_pairwise_sq_distances(pairwise_sq_distances: Callable) -> Feedback:
    """Exercise 2.2: squared distances between the rows of A (n, d) and B (m, d)."""
    rng = np.random.default_rng(2)
    shapes = [(3, 4, 2), (1, 1, 1), (2, 5, 3)]
    unseen = unseen_rng()

    def make(n: int, m: int, d: int, device: str, rng: np.random.Generator = rng,
             label: str = "") -> Test:
        A = rng.normal(size=(n, d)).astype(np.float32)
        B = rng.normal(size=(m, d)).astype(np.float32)
        expected = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)

        def run() -> None:
            a = tg.tensor(A, device=device, requires_grad=True)
            b = tg.tensor(B, device=device, requires_grad=True)
            tg.cuda.reset_transfer_stats()
            with watching_ops() as ops:
                got = pairwise_sq_distances(a, b)
            copies = tg.cuda.transfer_stats()["device_to_host"]
            expect_true(isinstance(got, tg.Tensor),
                        f"your function returned a {type(got).__name__}, not a teachgrad tensor",
                        hint="use tensor operations only (no .numpy() or Python loops)")
            expect_true(got.device.type == device,
                        f"inputs on {device} gave a result on {got.device}",
                        hint="don't move data yourself: operations run where their inputs live")
            expect_true(copies == 0 and got.grad_fn is not None,
                        "the result was not computed by tensor operations on A and B "
                        f"({'it left the device' if copies else 'it has no link to A and B'})",
                        hint="no .numpy() or .tolist(): compute with tensor operations only, so "
                             "the result stays connected to A and B (it has a grad_fn)")
            expect_close(got, expected, what="distance matrix",
                         hint="add axes with A[:, None, :] and B[None, :, :], subtract, "
                              "square, then sum over the last dimension")
            expect_true(len(ops) <= 12,
                        f"your code ran {len(ops)} tensor operations for {n} x {m} distances",
                        hint="no Python loops over rows: one broadcasted expression, "
                             "((A[:, None, :] - B[None, :, :]) ** 2).sum(dim=-1), does them all")
        return Test(f"{label}A of shape ({n}, {d}) and B of shape ({m}, {d}) on {device}", run,
                    hint="use tensor operations only: .numpy() and .tolist() leave autograd "
                         "(and the device)")

    tests = [make(*s, "cpu") for s in shapes] + [make(2, 3, 2, "cuda")]
    tests += [make(*(int(v) for v in unseen.integers(2, 7, size=3)), "cpu", unseen,
                   "unseen random values: ")]
    return check("2.2", tests, candidate=pairwise_sq_distances,
                 solved="one broadcasted expression computes all n x m distances, on any device.")


def check_min_max_scale_on_device(min_max_scale_on_device: Callable) -> Feedback:
    """Exercise 2.3: scale to [0, 1] on cuda with one copy in and no copy back."""
    rng = np.random.default_rng(3)
    inputs = [rng.normal(size=(2, 3)).astype(np.float32) * 5,
              np.array([4.0, -1.0, 9.0], dtype=np.float32),
              unseen_rng().normal(size=(3, 2)).astype(np.float32) * 7]

    def make(values: np.ndarray) -> Test:
        def run() -> None:
            x = tg.tensor(values)
            tg.cuda.reset_transfer_stats()
            with watching_ops() as ops:
                got = min_max_scale_on_device(x)
            stats = tg.cuda.transfer_stats()
            expect_true(isinstance(got, tg.Tensor) and got.device.type == "cuda",
                        "the result should be a tensor on cuda",
                        hint="move x with x.to('cuda') and compute there")
            expect_true(stats["device_to_host"] == 0,
                        f"your code copied data back to the host {stats['device_to_host']} "
                        "time(s) before returning",
                        hint=".item(), .cpu(), .tolist() and printing a cuda tensor all copy to "
                             "the host; keep min and max as tensors on the device")
            expect_true(stats["host_to_device"] == 1,
                        f"your code made {stats['host_to_device']} host-to-device copies, not 1",
                        hint="copy x to the device once and reuse that copy")
            _expect_work_on_device(ops)
            expected = (values - values.min()) / (values.max() - values.min())
            expect_close(got, expected, what="scaled values",
                         hint="(x - min) / (max - min), with min and max of the whole tensor")
        description = (f"x = {values.tolist()}" if values.ndim == 1
                       else f"a random x of shape {values.shape}")
        return Test(description, run)

    return check("2.3", [make(v) for v in inputs], candidate=min_max_scale_on_device,
                 solved="the work ran on the device with exactly one copy in and none back.")


def _expect_work_on_device(ops: list) -> None:
    """The arithmetic ran as teachgrad operations on cuda, not on the host and copied in."""
    work = [op for op in ops if op.function.__name__ != "ToDevice"]
    on_host = [op for op in work if any(o.device.type != "cuda" for o in op.outputs
                                        if isinstance(o, tg.Tensor))]
    expect_true(not on_host,
                f"part of the work ran on the host: {on_host[0].function.__name__} "
                "gave a cpu tensor" if on_host else "",
                hint="copy x to the device first, then compute min, max and the scaling there")
    expect_true(len(work) >= 3,
                f"only {len(work)} operation(s) ran on the device: the scaling was computed "
                "somewhere else (numpy, or a cpu tensor) and only the result was copied in",
                hint="x_gpu = x.to('cuda'), then (x_gpu - x_gpu.min()) / (x_gpu.max() - "
                     "x_gpu.min()): every step runs as a kernel on the device")


# --- 2.4 broadcasting, backwards: sum-to-shape (plugged into autograd.sum_to_shape) -------------

def _broadcast_case(strategies):
    """(shape, grad shape, dtype, layout): an input's shape, a shape it broadcasts to (extra
    leading dimensions, size-1 dimensions stretched), and how the gradient is laid out."""
    sizes = strategies.integers(1, 4)
    # a size-1 dimension broadcasts to any size, 0 included (an empty batch), now and then
    stretch = strategies.sampled_from([0, 1, 2, 3, 4, 1, 2, 3, 4, 2, 3, 4])

    def grad_shape(shape):
        stretched = strategies.tuples(*[stretch if n == 1 else
                                        strategies.just(n) for n in shape])
        lead = strategies.lists(sizes, max_size=2).map(tuple)
        return strategies.tuples(strategies.just(shape), strategies.tuples(lead, stretched).map(
            lambda parts: parts[0] + parts[1]))

    shapes = strategies.lists(strategies.sampled_from([1, 1, 2, 3, 4]), max_size=4).map(tuple)
    return strategies.tuples(shapes.flatmap(grad_shape),
                             strategies.sampled_from(["float64", "float32"]),
                             strategies.sampled_from(["contiguous", "transposed", "expanded"]))


def _gradient(grad_shape: tuple, shape: tuple, dtype: str, layout: str, seed: int) -> "tg.Tensor":
    """A gradient of ``grad_shape``: a plain array, a transposed view, or an expanded one
    (stride 0 along the stretched dimensions, as the gradient of an ``expand`` is)."""
    rng = np.random.default_rng(seed)
    if layout == "expanded":
        small = tg.tensor(rng.normal(size=shape), dtype=getattr(tg, dtype))
        return small.expand(grad_shape)
    if layout == "transposed" and len(grad_shape) >= 2:
        swapped = grad_shape[:-2] + (grad_shape[-1], grad_shape[-2])
        return tg.tensor(rng.normal(size=swapped), dtype=getattr(tg, dtype)).mT
    return tg.tensor(rng.normal(size=grad_shape), dtype=getattr(tg, dtype))


def _sum_to_shape_mismatch(got, grad: np.ndarray, shape: tuple, what: str) -> None:
    """Raise a Mismatch naming the slip when ``got`` is not ``grad`` summed to ``shape``."""
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, n in enumerate(shape)
                                      if n == 1 and grad.shape[lead + k] != 1)
    expected = grad.astype(np.float64).sum(axis=axes, keepdims=True).reshape(shape)  # exact
    expect_true(isinstance(got, tg.Tensor), f"your function returned a {type(got).__name__} "
                f"({what})", hint="return a teachgrad tensor: grad.sum(...) is one")
    got_shape = tuple(got.shape)
    if got_shape != shape:
        if len(got_shape) > len(shape):
            hint = "the leading dimensions broadcasting added must be summed away too"
        elif len(got_shape) < len(shape):
            hint = ("a dimension of size 1 disappeared: sum with keepdim=True, so a stretched "
                    "dimension stays as size 1")
        elif got_shape == grad.shape:
            hint = "nothing was summed: broadcasting stretched some dimensions, sum over them"
        else:
            hint = "line the shapes up from the right, as broadcasting does"
        raise Mismatch(f"wrong shape ({what}): expected {list(shape)}, got {list(got_shape)}",
                       expected, got, hint)
    expect_true(got.dtype == getattr(tg, str(grad.dtype)), f"the result is {got.dtype}, but "
                f"the gradient was {grad.dtype} ({what})", hint="keep grad's dtype: "
                "sum and reshape do; don't convert")
    mean = grad.mean(axis=axes, keepdims=True).reshape(shape) if axes and grad.size else expected
    hint = ("sum, not mean: each stretched copy of the value contributed its own gradient"
            if axes and np.allclose(to_numpy(got), mean) else
            "sum over the leading dimensions broadcasting added, and over every dimension "
            "where shape has 1 but grad has more")
    expect_close(got, expected, what=f"summed gradient ({what})", hint=hint,
                 rtol=1e-5 if grad.dtype == np.float32 else 1e-10,
                 atol=_rounding_bound(grad, axes))


def _rounding_bound(grad: np.ndarray, axes: tuple) -> float:
    """The most that adding up ``grad`` over ``axes`` (n numbers per sum) in any order can
    miss the exact sums by (n·u·Σ|g|, u the dtype's unit roundoff), at least 1e-6: summing
    one dimension after another rounds differently from summing all at once, and a sum
    near zero has no relative accuracy to speak of. A wrong sum (a mean, a dimension
    left out) misses by far more."""
    if not axes or not grad.size:
        return 1e-6
    summed = int(np.prod([grad.shape[a] for a in axes]))
    unit = float(np.finfo(grad.dtype).eps) / 2
    magnitude = float(np.abs(grad.astype(np.float64)).sum(axis=axes).max())
    return max(1e-6, 2 * summed * unit * magnitude)


def check_sum_to_shape(sum_to_shape: Callable) -> Feedback:
    """Exercise 2.4: a broadcast gradient summed back to its input's shape, then the
    engine's backward and gradcheck run with it."""
    def on(shape: tuple, grad_shape: tuple, dtype: str = "float64",
           layout: str = "contiguous", seed: int = 0) -> None:
        grad = _gradient(grad_shape, shape, dtype, layout, seed)
        with written_by_the_learner("autograd.sum_to_shape", "sum_to_shape"):
            got = sum_to_shape(grad, shape)
        _sum_to_shape_mismatch(got, grad.numpy(), shape, f"grad of shape {list(grad_shape)}, "
                               f"{dtype}, {layout}, summed to shape {list(shape)}")

    def shown() -> None:
        on((1, 2), (2, 2))   # column means, subtracted from every row
        on((3, 1), (3, 4))   # the column of section 2.3
        on((4,), (3, 4))     # its row

    def empty() -> None:  # broadcast to a size-0 dimension: the gradient is all zeros
        on((1,), (0,))
        on((3, 1), (3, 0), layout="expanded")
        on((2,), (0, 2))
        on((1, 1), (2, 0), "float32")

    def stretched_beside_kept() -> None:  # a stretched size-1 dimension before a kept one
        on((2, 1, 1), (2, 4, 1))
        on((1, 1, 1), (1, 3, 1), "float32", "expanded")

    def random(case) -> None:
        (shape, grad_shape), dtype, layout = case
        on(shape, grad_shape, dtype, layout, seed=len(shape) + 7 * len(grad_shape))

    def engine_runs_it() -> None:
        rng = np.random.default_rng(5)
        column, row = rng.normal(size=(3, 1)), rng.normal(size=4)
        x, W, b = rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=4)

        def grads() -> list:
            leaves = [tg.tensor(v, requires_grad=True) for v in (column, row, x, W, b)]
            c, r, xt, Wt, bt = leaves
            loss = ((c + r) * (c - r)).sum() + ((xt @ Wt + bt).tanh() - xt.mean(dim=0, keepdim=True)
                                                @ Wt).sum()
            loss.backward()
            return [leaf.grad.numpy() for leaf in leaves]

        expected = grads()
        with plugged_workload("autograd.sum_to_shape", sum_to_shape, "backward ran"):
            for got, want, name in zip(grads(), expected, ("column", "row", "x", "W", "b")):
                expect_close(got, want, what=f"{name}.grad with your sum_to_shape",
                             rtol=1e-10, atol=1e-12)
            inputs = (tg.tensor(column, requires_grad=True), tg.tensor(row, requires_grad=True))
            expect_true(tg.autograd.gradcheck(lambda c, r: (c * r).tanh().sum(), inputs,
                                              raise_exception=False),
                        "gradcheck failed with your sum_to_shape plugged in")

    tests = [Test("the shapes of section 2.3: (2, 2) -> (1, 2), (3, 4) -> (3, 1) and (4,)", shown),
             Test("empty gradients: a size-1 dimension broadcast to size 0 sums to zeros", empty),
             property_test("random shapes, float32 and float64, transposed and expanded "
                           "gradients", _broadcast_case, random, examples=60),
             # (after the random shapes: the draw may miss a slip this case always shows)
             Test("a stretched size-1 dimension beside one left at size 1: (2, 4, 1) -> "
                  "(2, 1, 1)", stretched_beside_kept),
             Test("backward and gradcheck through broadcasting ops, with yours plugged in",
                  engine_runs_it)]
    return check("2.4", tests, candidate=sum_to_shape,
                 solved="the engine summed every broadcast gradient with your sum_to_shape.")
