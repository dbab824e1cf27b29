"""Checkers for *Kernel practice* (chapter 8b): histogram, scan, 1-D convolution, transpose,
row softmax, matrix-vector product, im2col and row argmax.

Each checker compares the learner's kernel with its numpy spec on ragged and
unseen sizes, then looks at *how* it got there from a recorded launch
(:func:`teachgrad.kernels.record.record_accesses`: every read and write, by
which thread) and, where threads share memory, from the race check. So a
histogram that loses increments, a scan or a convolution that races, a
convolution that reads global memory over and over, and a transpose with
strided writes or bank conflicts are rejected even when the numbers look right.
"""
from .memory import (check_conv1d, check_histogram, check_im2col, check_transpose,
                           conv_spec, histogram_spec, im2col_spec)
from .shared import BLOCK_ROWS, BLOCKS, NBINS, RADIUS, THREADS, TILE
from .trees import (LARGE, check_block_scan, check_matvec, check_row_argmax,
                          check_row_softmax, scan_spec, softmax_spec)
from ..kernel_runs import is_stub

__all__ = [
    "THREADS", "BLOCKS", "NBINS", "RADIUS", "TILE", "BLOCK_ROWS", "LARGE", "is_stub",
    "check_histogram", "check_block_scan", "check_conv1d", "check_transpose",
    "check_row_softmax", "check_matvec", "check_im2col", "check_row_argmax",
    "histogram_spec", "scan_spec", "conv_spec", "im2col_spec", "softmax_spec",
]
