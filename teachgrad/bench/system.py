"""What machine and software a benchmark ran on (the results file's header)."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata

import numpy as np

from .schema import SCHEMA_VERSION, Ceiling, Header


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo (Linux), else what the platform module says."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def blas_name() -> str | None:
    """The BLAS library numpy.matmul calls, e.g. ``"scipy-openblas 0.3.31"``."""
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # numpy builds differ in what they report
        return None


def blas_threads() -> int | None:
    """Threads the BLAS behind numpy.matmul uses, asked of OpenBLAS itself.

    Finds the OpenBLAS library numpy has loaded (Linux: ``/proc/self/maps``) and
    calls its ``*openblas_get_num_threads*`` function. Falls back on
    ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``; None when neither says.
    """
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps
                            if "openblas" in line.lower() and ".so" in line})
    except OSError:
        paths = []
    names = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
             "openblas_get_num_threads64_", "openblas_get_num_threads")
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in names:
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_int
                threads = int(function())
                if threads > 0:
                    return threads
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(variable, "").split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def numba_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def gpu_details() -> dict[str, str | None]:
    """Name, driver, CUDA versions and compute capability of the current GPU (real GPUs only)."""
    from numba import cuda
    from numba.cuda.cudadrv import driver

    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    major, minor = driver.driver.get_version()
    runtime = cuda.runtime.get_version()
    return {
        "gpu_name": name,
        "gpu_driver": _nvidia_smi_driver(),
        "cuda_driver_api": f"{major}.{minor}",
        "cuda_runtime": ".".join(map(str, runtime)),
        "compute_capability": ".".join(map(str, device.compute_capability)),
    }


def _nvidia_smi_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip().splitlines()[0] or None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


#: Environment variables that change the timings: thread counts, numba's compile cache.
RECORDED_VARIABLES = ("NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "NUMBA_CACHE_DIR", "OMP_NUM_THREADS",
                      "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TEACHGRAD_CUDA")


def settings() -> str | None:
    """The variables of :data:`RECORDED_VARIABLES` set in this process, e.g. ``"OPENBLAS_NUM_THREADS=1"``."""
    found = [f"{name}={os.environ[name]}" for name in RECORDED_VARIABLES if name in os.environ]
    return ", ".join(found) or None


def make_header(command: str, simulated: bool, gpu: dict[str, str | None] | None = None,
                vendor_matmul: str | None = None, notes: list[str] | None = None,
                ceilings: list[Ceiling] | None = None, llc_bytes: int | None = None) -> Header:
    """A :class:`~teachgrad.bench.schema.Header` for a run made now, on this machine."""
    notes = list(notes or [])
    found = settings()
    if found:
        notes.append(f"settings: {found}")
    return Header(
        schema_version=SCHEMA_VERSION,
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command,
        simulated=simulated,
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count() or 1,
        cpu_threads=numba_threads(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        numpy=np.__version__,
        numba=package_version("numba") or "?",
        numba_cuda=package_version("numba-cuda"),
        blas=blas_name(),
        vendor_matmul=vendor_matmul,
        notes=notes,
        ceilings=list(ceilings or []),
        llc_bytes=llc_bytes,
        **(gpu or {}),
    )
