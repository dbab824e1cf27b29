"""The numpy backend's sigmoid and its gradient: numpy's whole-array calls against the compiled passes.

    python benchmarks/sigmoid_passes.py
    python benchmarks/sigmoid_passes.py --quick

float32 arrays of 10 to 10^6 elements; for each, in turns in one process (one thread
each, ``common.py`` sets the thread variables):

* ``formula``: numpy's calls, ``numpy_backend._sigmoid_formula`` (seven of them) and
  ``grad * s * (1 - s)`` (three);
* ``passes``: ``sigmoid_loops.sigmoid`` (two compiled passes around numpy's ``exp``) and
  ``sigmoid_loops.sigmoid_gradient`` (one pass), the same bits;
* ``torch``: ``torch.sigmoid`` and ``torch.ops.aten.sigmoid_backward``, for scale.

The numpy backend takes the passes for the forward from two elements once numba is
loaded, and from 64 KiB whether or not it is (loading it for them); the gradient from
512 elements once numba is loaded (``ops/elementwise.py``).
"""
from __future__ import annotations

from pathlib import Path

from common import header, import_torch, parse_arguments, print_table, save, seconds_per_call

import numpy as np  # noqa: E402

from teachgrad.backends import sigmoid_loops  # noqa: E402
from teachgrad.backends.numpy_backend import _sigmoid_formula  # noqa: E402

SIZES = (10, 100, 1000, 10_000, 100_000, 1_000_000)


def rows_for(torch, loops_for, repeats: int) -> list[dict]:
    rows = []
    for size in SIZES:
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(size) * 4).astype(np.float32)
        grad = rng.standard_normal(size).astype(np.float32)
        s = sigmoid_loops.sigmoid(x)
        one = np.ones((), np.float32)
        assert sigmoid_loops.sigmoid(x).tobytes() == _sigmoid_formula(x).tobytes()
        forward = {"formula": lambda: _sigmoid_formula(x), "passes": lambda: sigmoid_loops.sigmoid(x)}
        backward = {"formula": lambda: grad * s * (one - s),
                    "passes": lambda: sigmoid_loops.sigmoid_gradient(grad, s)}
        if torch is not None:
            tx, tgrad, ts = (torch.from_numpy(a.copy()) for a in (x, grad, s))
            forward["torch"] = lambda: torch.sigmoid(tx)
            backward["torch"] = lambda: torch.ops.aten.sigmoid_backward(tgrad, ts)
        for direction, works in (("forward", forward), ("gradient", backward)):
            times = seconds_per_call(works, loops_for(size), repeats)
            row = {"direction": direction, "elements": size}
            for name, t in times.items():
                for stat in ("median", "min", "max"):
                    row[f"{name}_us_{stat}"] = t[stat] * 1e6
            for stat in ("median", "min", "max"):
                row[f"speedup_{stat}"] = times["formula"][stat] / times["passes"][stat]
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> dict:
    args = parse_arguments(__doc__, argv, loops=2000, repeats=15, quick=(200, 5),
                           out="sigmoid_passes.json")
    torch = import_torch()
    run_header = header(torch)
    scale = args.loops

    def loops_for(size: int) -> int:  # (about the same time per timing at every size)
        return max(2, scale * 1000 // max(size, 1000))

    rows = rows_for(torch, loops_for, args.repeats)
    print_table("microseconds per call, float32, one thread (medians; speed-up also as the "
                "ratio of minima)",
                ["", "elements", "formula", "passes", "torch", "speed-up", "speed-up (min)"],
                [[r["direction"], r["elements"], r["formula_us_median"], r["passes_us_median"],
                  r.get("torch_us_median"), r["speedup_median"], r["speedup_min"]] for r in rows])
    result = {"benchmark": "sigmoid_passes", "header": run_header, "loops": args.loops,
              "repeats": args.repeats, "results": rows}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
