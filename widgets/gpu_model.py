"""A modelled GPU line for SpeedChart, computed from cited public figures (never measured).

No GPU is available to this project's machines, so unless someone loads a
results file recorded on a real GPU, the speed chart has no GPU timings. This
module gives it a line anyway, drawn unmistakably as a model: the time of an
operation on a named GPU, from the figures its maker and the numba-cuda
developers have published::

    time(op, n) = launch latency + max(bytes / memory bandwidth, FLOPs / FP32 peak)
                  (+ bytes over PCIe, when the data starts and ends on the host)

It is a best case: a kernel that streams memory at the full spec-sheet
bandwidth, or computes at the full FP32 peak, right after a launch as fast as
numba-cuda's. teachgrad's own kernels are slower than that, so the real
crossover lies at larger sizes than the model's. A results file recorded on a
real GPU replaces the model in the chart.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teachgrad.bench.cases import traffic

#: The ops the model knows (their bytes and FLOPs come from the bench's own counts).
MODELLED_OPS = ("add", "sum", "copy", "matmul")


@dataclass(frozen=True)
class Published:
    """One published figure: its value, in SI units, and where it was published."""

    value: float
    unit: str
    what: str
    source: str

    def text(self) -> str:
        return f"{self.what}: {self.value:.4g} {self.unit} ({self.source})"


@dataclass(frozen=True)
class GPUModel:
    """The figures of one GPU, and the model time of an op from them."""

    name: str
    bandwidth: Published  #: device memory bandwidth, bytes/s
    fp32_peak: Published  #: FP32 peak, FLOP/s (the CUDA cores, not tensor cores)
    launch: Published  #: seconds to launch one kernel with three array arguments
    pcie: Published  #: host-device link, bytes/s in one direction

    @property
    def label(self) -> str:
        return f"{self.name}: model from published figures, not measured"

    def seconds(self, op: str, size: int, dtype: str = "float32",
                data_on_host: bool = False) -> float:
        """Model time of ``op`` at ``size`` (elements, or the side of an n x n matmul)."""
        if op not in MODELLED_OPS:
            raise ValueError(f"no model for {op!r}: the model knows {', '.join(MODELLED_OPS)}")
        moved, flops = traffic(op, size, np.dtype(dtype))
        seconds = self.launch.value + max(moved / self.bandwidth.value,
                                          flops / self.fp32_peak.value)
        if data_on_host:
            seconds += moved / self.pcie.value  # inputs in and the result out, over the link
        return seconds

    def times(self, op: str, sizes, dtype: str = "float32") -> np.ndarray:
        return np.array([self.seconds(op, int(n), dtype) for n in sizes])

    def sources(self) -> list[str]:
        return [f.text() for f in (self.bandwidth, self.fp32_peak, self.launch, self.pcie)]


_H100_DATASHEET = ("NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column, "
                   "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")

#: NVIDIA H100 SXM5. The launch latency is numba-cuda's own, measured by its developers
#: with empty kernels: 6.6 µs with no argument, 10.6 µs with one array, 14.1 µs with two;
#: each array adds about 3.5 µs, so a kernel with three arrays (add, matmul) takes about
#: 17.6 µs (our extrapolation). PCIe Gen5 x16: NVIDIA quotes 128 GB/s, both directions.
H100_SXM5 = GPUModel(
    name="NVIDIA H100 SXM5",
    bandwidth=Published(3.35e12, "B/s", "memory bandwidth", _H100_DATASHEET),
    fp32_peak=Published(67e12, "FLOP/s", "FP32 peak", _H100_DATASHEET),
    launch=Published(17.6e-6, "s", "numba-cuda kernel launch, three array arguments",
                     "empty-kernel timings in NVIDIA/numba-cuda pull request 288 (2025-06-11): "
                     "14.1 µs with two arrays, plus 3.5 µs per array, extrapolated"),
    pcie=Published(64e9, "B/s", "PCIe Gen5 x16, one direction",
                   _H100_DATASHEET + " (128 GB/s both directions)"),
)
