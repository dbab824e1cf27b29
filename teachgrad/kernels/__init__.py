"""The numba.cuda kernels behind the ``cuda`` device, one module per idea.

Read them in this order:

* :mod:`~teachgrad.kernels.strided` -- a tensor is a flat buffer plus shape, strides, offset;
* :mod:`~teachgrad.kernels.launch` -- grids, blocks and the limits every launch is checked against;
* :mod:`~teachgrad.kernels.elementwise` -- grid-stride loops, applying the scalar
  functions of :mod:`~teachgrad.kernels.ops`;
* :mod:`~teachgrad.kernels.reduce` -- a tree in shared memory, and the barrier it needs;
* :mod:`~teachgrad.kernels.matmul` -- naive, tiled in shared memory, register-blocked;
* :mod:`~teachgrad.kernels.indexing` -- views for slices, gather, and scatter-add with atomics;
* :mod:`~teachgrad.kernels.record` -- what each thread did, recorded from real launches;
* :mod:`~teachgrad.kernels.race` -- finding a missing ``syncthreads``;
* :mod:`~teachgrad.kernels.transfer` -- counted host<->device copies;
* :mod:`~teachgrad.kernels.attention` -- attention in tiles, with the online softmax
  (:mod:`~teachgrad.kernels.attention_naive`: the score matrix written out; the gradients,
  recomputed: :mod:`~teachgrad.kernels.attention_backward`; what both did:
  :mod:`~teachgrad.kernels.attention_record`);
* :mod:`~teachgrad.kernels.tensor_core` -- a model of a tensor core's warp-wide
  matrix-multiply-accumulate, and a matmul built on it.

``python -m teachgrad.kernels.compile_check`` compiles every kernel for a real
GPU without needing one (the simulator never type-checks kernels).
Modules are imported on demand: importing this package does not import numba.
"""

#: Tensor-level entry points, loaded on first use: ``tg.kernels.flash_attention(q, k, v)``.
_ENTRY_POINTS = {"flash_attention": "attention_autograd", "tensor_core_matmul": "tensor_core"}


def __getattr__(name: str):
    if name in _ENTRY_POINTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
