"""GPU cases: teachgrad's numba.cuda kernels and the hardware's ceilings.

The ceilings are measured in the same run, on the same GPU:

* **bandwidth** -- a device-to-device copy (``cuMemcpyDtoD``, the driver's own
  copy), counting the bytes read plus the bytes written;
* **matmul** -- the vendor's matrix product, cuBLAS through CuPy or PyTorch
  (whichever is installed), in true float32: TF32 would round the inputs to
  10 bits of mantissa and is switched off.

Inputs are uploaded once per size, outputs are preallocated, and every
kernel is timed with CUDA events (the vendor's own events for CuPy/PyTorch).
In numba's CUDA simulator the same code runs at tiny sizes, timed on the
host and marked ``simulated``: it checks the code paths, not the speed.
"""
from __future__ import annotations

import numpy as np

from .cases import Case, shapes
from .harness import CudaEventTimer, HostTimer

#: teachgrad's matmul kernels, in the order the chapter walks through them.
CUDA_MATMUL_KERNELS = ("naive", "tiled", "register")


def _timers(simulated: bool):
    """``(make_timer, make_first_call_timer)`` for numba.cuda work."""
    from ..streams import synchronize

    def host_timer() -> HostTimer:
        return HostTimer(sync=synchronize)  # waits for teachgrad's streams too

    return (host_timer if simulated else CudaEventTimer), host_timer


def cuda_cases(op: str, size: int, inputs: tuple[np.ndarray, ...], simulated: bool,
               vendor: str | None = None,
               matmul_kernels: tuple[str, ...] = CUDA_MATMUL_KERNELS) -> list[Case]:
    """teachgrad's kernels doing ``op`` (and the copy ceiling for ``copy``).

    ``vendor`` names the library whose cuBLAS matmul is the matmul ceiling.
    """
    from numba import cuda

    from ..kernels import elementwise, matmul, reduce, strided

    make_timer, make_first = _timers(simulated)
    dtype = inputs[0].dtype
    common = dict(backend="cuda", device="cuda", dtype=dtype, size=size, shape=shapes(op, size),
                  make_timer=make_timer, make_first_call_timer=make_first, simulated=simulated)
    device_inputs = [cuda.to_device(x) for x in inputs]
    if op == "copy":
        (src,) = device_inputs
        dst = cuda.device_array_like(src)
        return [Case(op, kernel="memcpy", work=lambda: dst.copy_to_device(src),
                     output=dst.copy_to_host, is_ceiling=True, **common)]
    if op == "add":
        a, b = (strided.wrap(x) for x in device_inputs)
        out = strided.new_array(a.shape, dtype)
        return [Case(op, kernel="grid_stride_zip", work=lambda: elementwise.binary("add", out, a, b),
                     output=lambda: out.buffer.copy_to_host()[:size], ceiling="copy/cuda/memcpy",
                     **common)]
    if op == "sum":
        rows = device_inputs[0].reshape(1, size)
        result = {}

        def tree_sum() -> None:
            result["out"] = reduce.reduce_rows("sum", rows)

        return [Case(op, kernel="tree_reduce_rows", work=tree_sum,
                     output=lambda: result["out"].copy_to_host(), ceiling="copy/cuda/memcpy", **common)]
    if op == "matmul":
        A, B = (x.reshape(1, size, size) for x in device_inputs)
        cases = []
        for kernel in matmul_kernels:
            C = cuda.device_array((1, size, size), dtype=dtype)
            launch = matmul.KERNELS[kernel]
            cases.append(Case(op, kernel=kernel, work=lambda launch=launch, C=C: launch(A, B, C),
                              output=lambda C=C: C.copy_to_host()[0],
                              ceiling=f"matmul/{vendor}/cublas" if vendor else None,
                              **common))
        return cases
    raise ValueError(f"unknown benchmark op {op!r}")


# -- the vendor's matmul ----------------------------------------------------------------

class CupyEventTimer:
    """GPU time between two CuPy events on CuPy's current stream."""

    name = "cupy_event"

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy
        self._begin, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def start(self) -> None:
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._cupy.cuda.get_elapsed_time(self._begin, self._end) / 1e3


class TorchEventTimer:
    """GPU time between two PyTorch CUDA events on PyTorch's current stream."""

    name = "torch_event"

    def __init__(self) -> None:
        import torch

        self._begin = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._begin.elapsed_time(self._end) / 1e3


def find_vendor() -> str | None:
    """``"cupy"`` or ``"torch"`` when that library sees a GPU, else None (CuPy first)."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return "cupy"
    except Exception:  # not installed, or installed without a usable GPU
        pass
    try:
        import torch

        if torch.cuda.is_available():
            return "torch"
    except Exception:
        pass
    return None


def vendor_description(vendor: str) -> str:
    from .system import package_version

    if vendor == "cupy":
        import cupy

        version = cupy.__version__
    else:
        version = package_version("torch")
    return f"{vendor} {version or '?'} (cuBLAS, float32 without TF32)"


def vendor_matmul_case(vendor: str, size: int, inputs: tuple[np.ndarray, ...]) -> Case:
    """cuBLAS's ``n x n`` matmul through ``vendor``: the ceiling for the matmul kernels."""
    a_host, b_host = inputs
    common = dict(op="matmul", backend=vendor, device="cuda", dtype=a_host.dtype, size=size,
                  shape=shapes("matmul", size), is_ceiling=True)
    if vendor == "cupy":
        import cupy

        a, b = cupy.asarray(a_host), cupy.asarray(b_host)
        c = cupy.empty_like(a)
        first = lambda: HostTimer(sync=cupy.cuda.runtime.deviceSynchronize)  # noqa: E731
        return Case(kernel="cublas", work=lambda: cupy.matmul(a, b, out=c), output=lambda: cupy.asnumpy(c),
                    make_timer=CupyEventTimer, make_first_call_timer=first, **common)
    import torch

    torch.set_float32_matmul_precision("highest")  # true float32: no TF32
    a, b = torch.from_numpy(a_host).cuda(), torch.from_numpy(b_host).cuda()
    c = torch.empty_like(a)
    first = lambda: HostTimer(sync=torch.cuda.synchronize)  # noqa: E731
    return Case(kernel="cublas", work=lambda: torch.matmul(a, b, out=c), output=lambda: c.cpu().numpy(),
                make_timer=TorchEventTimer, make_first_call_timer=first, **common)
