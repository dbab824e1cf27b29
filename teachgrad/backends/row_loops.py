"""``out[rows[k]] += values[k]`` as one compiled loop (an embedding's backward).

The numpy way (``numpy_backend.add_rows_sorted``) sorts the row numbers, gathers the
values in that order and sums each run of equal rows with ``reduceat``: five whole-array
passes and a sort. This loop walks the values once, adding each into its row in the order
of ``k``. ``reduceat`` groups its additions differently, so the two agree within rounding,
not in every bit (``tests/engine/test_row_loops.py``).
"""
from __future__ import annotations

from numba import njit


@njit(cache=True, error_model="numpy")
def add_rows(out, rows, values):
    """``out`` is ``(R, n)``, ``rows`` ``(K,)`` integers in ``[-R, R)``, ``values`` ``(K, n)``."""
    count = out.shape[0]
    for k in range(rows.shape[0]):
        r = rows[k]
        if r < 0:
            r += count  # (-1 is the last row, as in numpy)
        if r < 0 or r >= count:  # (a compiled loop checks no bounds: an index changed since
            raise IndexError("a row index is out of range for the gradient's rows")  # forward)
        target, source = out[r], values[k]
        for j in range(out.shape[1]):
            target[j] += source[j]
