"""Where the realistic chain's time goes: its pieces, teachgrad vs PyTorch, one element.

    python benchmarks/chain_breakdown.py --clock cpu
    python benchmarks/chain_breakdown.py --elements 1000 --numba-loaded

``engine_overhead.py`` times the whole "realistic" chain (``y = (y * w + 0.1).tanh() -
y.sigmoid() * 0.5`` four times, then ``y.sum().backward()``). This script times its
pieces, each on both libraries in turns (one thread each, same process):

* ``whole``: the chain, forward and backward, as ``engine_overhead.py`` runs it;
* ``forward + sum``: the forward and its sum, the graph recorded and then dropped (so
  freeing the graph is in it);
* ``forward, no_grad``: the same arithmetic with nothing recorded;
* each of the chain's six operations alone on tensors that require grad, result dropped.

Derived (from the medians, and from the minima): recording = ``forward + sum`` - ``forward, no_grad``, the cost of the
graph; backward = ``whole`` - ``forward + sum``, the backward pass with its set-up.

``--elements N`` times the same pieces on N-element inputs; ``--numba-loaded`` loads
numba first, as ``engine_overhead.py`` does (the numpy backend's sigmoid then takes its
compiled passes at every size).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from common import (  # (first: it sets one thread per library before numpy loads)
    add_clock_option, compare, header, import_torch, parse_arguments, print_table, save,
)

import numpy as np  # noqa: E402  (after common, which sets the thread variables)

from engine_overhead import realistic_step  # noqa: E402


def forward(y0: Any, w: Any) -> Any:
    y = y0
    for _ in range(4):
        y = (y * w + 0.1).tanh() - y.sigmoid() * 0.5
    return y.sum()


def forward_without_grad(lib: Any, y0: Any, w: Any) -> Any:
    with lib.no_grad():
        return forward(y0, w)


#: name -> what it runs on (lib, y0, w, z, s): y0 and w leaves that require grad, z a
#: non-leaf (``(y0 * w + 0.1).tanh()``) and s = ``y0.sigmoid()``, as inside the chain
PIECES: dict[str, Callable[..., Any]] = {
    "whole": lambda lib, y0, w, z, s: realistic_step(y0, w),
    "forward + sum": lambda lib, y0, w, z, s: forward(y0, w),
    "forward, no_grad": lambda lib, y0, w, z, s: forward_without_grad(lib, y0, w),
    "y * w": lambda lib, y0, w, z, s: z * w,
    "+ 0.1": lambda lib, y0, w, z, s: z + 0.1,
    "tanh": lambda lib, y0, w, z, s: z.tanh(),
    "sigmoid": lambda lib, y0, w, z, s: z.sigmoid(),
    "* 0.5": lambda lib, y0, w, z, s: s * 0.5,
    "- (two tensors)": lambda lib, y0, w, z, s: z - s,
}


def work_for(lib: Any, piece: str, elements: int = 1) -> Callable[[], None]:
    """``piece`` on fresh float32 inputs of ``elements`` elements (the same values for both
    libraries)."""
    rng = np.random.default_rng(0)
    y0, w = [lib.tensor(rng.standard_normal(elements).astype(np.float32), requires_grad=True)
             for _ in range(2)]
    z = (y0 * w + 0.1).tanh()
    s = y0.sigmoid()
    run = PIECES[piece]
    return lambda: run(lib, y0, w, z, s)


def main(argv: list[str] | None = None) -> dict:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--elements", type=int, default=1)
        parser.add_argument("--numba-loaded", action="store_true",
                            help="load numba before timing (see above)")
        add_clock_option(parser)

    args = parse_arguments(__doc__, argv, loops=200, repeats=25, quick=(50, 7),
                           out="chain_breakdown.json", extra=options)
    if args.numba_loaded:
        import numba  # noqa: F401
    torch = import_torch()
    run_header = header(torch)
    rows = {piece: compare(lambda lib: work_for(lib, piece, args.elements), torch, loops=args.loops,
                           repeats=args.repeats, scale=1e6, unit="us", target=1.0,
                           clock=args.clock)
            for piece in PIECES}
    libs = ["teachgrad"] + (["torch"] if torch is not None else [])
    derived = {lib: {stat: {
        "recording": rows["forward + sum"][f"{lib}_us_{stat}"]
        - rows["forward, no_grad"][f"{lib}_us_{stat}"],
        "backward": rows["whole"][f"{lib}_us_{stat}"] - rows["forward + sum"][f"{lib}_us_{stat}"]}
        for stat in ("median", "min")} for lib in libs}
    table = [[piece, *[rows[piece][f"{lib}_us_{stat}"] for lib in libs
                       for stat in ("median", "min")]] for piece in PIECES]
    table += [[f"({name}, derived)", *[derived[lib][stat][name] for lib in libs
                                       for stat in ("median", "min")]]
              for name in ("recording", "backward")]
    print_table(f"microseconds of {args.clock} time, {args.elements} element(s) (median, min)", ["piece", *[
        f"{lib} {stat}" for lib in libs for stat in ("median", "min")]], table)
    result = {"benchmark": "chain_breakdown", "header": run_header, "loops": args.loops,
              "elements": args.elements, "numba_loaded": "numba" in sys.modules,
              "repeats": args.repeats, "clock": args.clock, "pieces": rows, "derived": derived}
    save(result, Path(args.out))
    return result


if __name__ == "__main__":
    main()
