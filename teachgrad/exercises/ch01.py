"""Checkers for chapter 1, *Why ML systems*: peak FLOP arithmetic and asynchronous dispatch."""
from __future__ import annotations

import math
from typing import Callable

from .core import Feedback, Mismatch, Test, check, unseen_rng


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def _number(got: object, what: str) -> float:
    """The learner's answer as a float, or a Mismatch saying what came back instead."""
    if isinstance(got, bool) or not isinstance(got, (int, float)) and not hasattr(got, "__float__"):
        raise Mismatch(f"expected a number for the {what}, got a {type(got).__name__}",
                       hint="return a plain Python number")
    return float(got)


def _numeric_test(description: str, answer: Callable[[], object], expected: float, what: str,
                  slips: list[tuple[float, str]], hint: str) -> Test:
    """A test of a numeric answer; ``slips`` pairs the value a common mistake gives with its hint.

    A slip only names the mistake when it differs from the right answer, so an
    edge case where both coincide never gives a misleading hint.
    """
    def run() -> None:
        got = _number(answer(), what)
        if _close(got, expected):
            return
        known = [text for value, text in slips
                 if _close(got, value) and not _close(value, expected)]
        raise Mismatch(f"wrong {what}", expected, got, known[0] if known else hint)
    return Test(description, run)


def check_peak_fp32_tflops(peak_fp32_tflops: Callable) -> Feedback:
    """Exercise 1.1: ``peak_fp32_tflops(sms, cores_per_sm, clock_ghz)`` in TFLOP/s."""
    cases = [
        ("the notes' GPU: 72 SMs, 64 FP32 cores each, 1.77 GHz", (72, 64, 1.77)),
        ("an H100 SXM5 (published): 132 SMs, 128 FP32 cores each, 1.98 GHz", (132, 128, 1.98)),
        ("one core at 1 GHz: 1 SM, 1 core, 1.0 GHz", (1, 1, 1.0)),
    ]
    rng = unseen_rng()
    for _ in range(2):
        args = (int(rng.integers(2, 200)), int(rng.choice([32, 64, 128])),
                round(float(rng.uniform(0.8, 2.6)), 2))
        cases.append((f"a GPU you have not seen: {args[0]} SMs, {args[1]} FP32 cores each, "
                      f"{args[2]} GHz", args))

    def make(description: str, args: tuple) -> Test:
        sms, cores, ghz = args
        expected = sms * cores * 2 * ghz / 1000
        slips = [(expected / 2, "a fused multiply-add (a*b + c) counts as two floating-point "
                                "operations"),
                 (expected * 1000, "cores x GHz gives GFLOP/s; divide by 1000 for TFLOP/s")]
        return _numeric_test(description, lambda: peak_fp32_tflops(*args), expected,
                             "peak TFLOP/s", slips,
                             "peak = SMs x cores per SM x 2 FLOP per cycle x cycles per second")

    return check("1.1", [make(d, a) for d, a in cases], candidate=peak_fp32_tflops,
                 solved="you can turn a GPU's spec sheet into its FP32 peak.")


def check_mma_flops(mma_flops: Callable) -> Feedback:
    """Exercise 1.2: FLOPs of ``D = A @ B + C`` with A (m, k), B (k, n), C (m, n)."""
    rng = unseen_rng()
    cases = [(4, 4, 4), (16, 8, 16), (2, 3, 5), (1, 1, 1), (3, 1, 7)]
    cases += [tuple(int(v) for v in rng.integers(1, 300, size=3)) for _ in range(2)]

    def make(m: int, n: int, k: int) -> Test:
        slips = [(m * n * (2 * k - 1), "you counted A @ B; the tensor core also adds C: "
                                       "one more addition per output"),
                 (m * n * k, "count multiplications and additions: each of the k products "
                             "is also summed in")]
        return _numeric_test(f"m={m}, n={n}, k={k}", lambda: mma_flops(m, n, k), 2 * m * n * k,
                             "number of FLOPs", slips,
                             "each of the m*n outputs needs k multiplications, k-1 additions "
                             "for the dot product, and 1 addition for C")

    return check("1.2", [make(*c) for c in cases], candidate=mma_flops,
                 solved="a 4x4x4 tensor-core step is 128 FLOPs, and you can count any other shape.")


def reference_async_finish_time(host_ms: float, device_ms: float, n_kernels: int) -> float:
    """When the last kernel finishes if the host enqueues and runs ahead (for the checker)."""
    enqueued = 0.0
    device_free = 0.0
    for _ in range(n_kernels):
        enqueued += host_ms  # the host prepares and enqueues the next kernel
        start = max(enqueued, device_free)  # it runs once queued and the device is idle
        device_free = start + device_ms
    return device_free


def check_async_finish_time(async_finish_time: Callable) -> Feedback:
    """Exercise 1.3: finish time of ``n`` kernels under asynchronous dispatch."""
    cases = [
        ("host 1 ms, device 3 ms, 4 kernels (the device is the bottleneck)", (1.0, 3.0, 4)),
        ("host 3 ms, device 1 ms, 4 kernels (the host is the bottleneck)", (3.0, 1.0, 4)),
        ("host 2 ms, device 2 ms, 1 kernel", (2.0, 2.0, 1)),
        ("host 0.5 ms, device 2 ms, 10 kernels", (0.5, 2.0, 10)),
        ("no kernels at all: host 1 ms, device 1 ms, 0 kernels", (1.0, 1.0, 0)),
    ]
    rng = unseen_rng()
    for _ in range(2):
        args = (round(float(rng.uniform(0.1, 5)), 2), round(float(rng.uniform(0.1, 5)), 2),
                int(rng.integers(2, 40)))
        cases.append((f"unseen: host {args[0]} ms, device {args[1]} ms, {args[2]} kernels", args))

    def make(description: str, args: tuple) -> Test:
        host, device, n = args
        slips = [(n * (host + device), "that is the synchronous time; with a queue the host "
                                       "prepares the next kernel while the device runs the "
                                       "previous one"),
                 (n * max(host, device), "close: the first kernel cannot start before the host "
                                         "enqueued it, and the last one still has to run after "
                                         "the host is done")]
        return _numeric_test(description, lambda: async_finish_time(*args),
                             reference_async_finish_time(*args), "finish time", slips,
                             "kernel i can start once it is enqueued (after i+1 host steps) and "
                             "the device has finished kernel i-1")

    return check("1.3", [make(d, a) for d, a in cases], candidate=async_finish_time,
                 solved="with a queue, the total time is set by the slower of host and device.")
