"""The GPU's runtime costs, measured with numba.cuda: what chapters 9 and 10 talk about.

    TEACHGRAD_CUDA=gpu python benchmarks/gpu_runtime.py --out build/gpu-check/runtime.json
    TEACHGRAD_CUDA=sim python benchmarks/gpu_runtime.py --out /tmp/runtime.json  # dry run

* **launch latency**: an empty kernel launched and waited for, one at a time; and the
  issue rate of launches sent back to back with one wait at the end;
* **transfer bandwidth**: host to device and back, from pageable and from pinned host
  memory, timed with CUDA events on a stream;
* **event timing**: a busy kernel timed by CUDA events and by the host clock around a
  synchronize (the difference is the launch and the wait);
* **stream overlap**: two one-block busy kernels on one stream, then on two streams
  (concurrent kernels), and a pinned copy beside a kernel on another stream (copy and
  compute at once). ``overlap`` is serial time over concurrent time: 2 is perfect.

Each figure is the median of repeats, with min and max. In numba's CUDA simulator the
same code runs at tiny sizes to check it works; the file is then marked
``simulated`` and its numbers are not GPU speed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import teachgrad as tg  # first: it decides GPU or simulator before numba is imported
from numba import cuda  # noqa: E402  (module level: the simulator swaps this name in kernels)


def _stats(samples: list[float]) -> dict:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples),
            "repeats": len(samples)}


def measure(simulated: bool) -> dict:
    @cuda.jit
    def empty():
        pass

    @cuda.jit
    def busy(out, steps):
        # one thread per block does a long dependent chain: time without memory traffic
        x = out[cuda.blockIdx.x]
        for _ in range(steps):
            x = x * 0.999999 + 1e-7
        out[cuda.blockIdx.x] = x

    repeats = 5 if simulated else 50
    steps = 10 if simulated else 2_000_000  # ~ a few ms on a current GPU
    nbytes = 1 << 16 if simulated else 256 << 20
    records: dict = {}

    empty[1, 1]()
    cuda.synchronize()
    one = []
    for _ in range(repeats):
        start = time.perf_counter()
        empty[1, 1]()
        cuda.synchronize()
        one.append(time.perf_counter() - start)
    records["launch_and_wait_us"] = {k: (v * 1e6 if k != "repeats" else v)
                                     for k, v in _stats(one).items()}
    burst = 20 if simulated else 1000
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(burst):
            empty[1, 1]()
        cuda.synchronize()
        rates.append((time.perf_counter() - start) / burst)
    records["launch_issue_us"] = {k: (v * 1e6 if k != "repeats" else v)
                                  for k, v in _stats(rates).items()}

    stream = cuda.stream()
    host_pageable = np.ones(nbytes // 4, dtype=np.float32)
    host_pinned = cuda.pinned_array(nbytes // 4, dtype=np.float32)
    host_pinned[:] = 1
    device = cuda.device_array(nbytes // 4, dtype=np.float32)
    for label, host in (("pageable", host_pageable), ("pinned", host_pinned)):
        for direction in ("h2d", "d2h"):
            speeds = []
            for _ in range(max(3, repeats // 5)):
                begin, end = cuda.event(), cuda.event()
                begin.record(stream)
                if direction == "h2d":
                    device.copy_to_device(host, stream=stream)
                else:
                    device.copy_to_host(host, stream=stream)
                end.record(stream)
                end.synchronize()
                speeds.append(nbytes / max(begin.elapsed_time(end) / 1e3, 1e-9) / 1e9)
            records[f"{direction}_{label}_GBps"] = _stats(speeds)

    out = cuda.to_device(np.ones(4, dtype=np.float64))
    busy[1, 1](out, steps)  # compile
    cuda.synchronize()
    by_event, by_host = [], []
    for _ in range(max(3, repeats // 5)):
        begin, end = cuda.event(), cuda.event()
        start = time.perf_counter()
        begin.record(stream)
        busy[1, 1, stream](out, steps)
        end.record(stream)
        end.synchronize()
        by_host.append((time.perf_counter() - start) * 1e3)
        by_event.append(begin.elapsed_time(end))
    records["busy_kernel_event_ms"] = _stats(by_event)
    records["busy_kernel_host_ms"] = _stats(by_host)

    streams = [cuda.stream(), cuda.stream()]
    serial, concurrent = [], []
    for _ in range(3):
        start = time.perf_counter()
        busy[1, 1, streams[0]](out, steps)
        busy[1, 1, streams[0]](out, steps)
        cuda.synchronize()
        serial.append(time.perf_counter() - start)
        start = time.perf_counter()
        busy[1, 1, streams[0]](out, steps)
        busy[1, 1, streams[1]](out, steps)
        cuda.synchronize()
        concurrent.append(time.perf_counter() - start)
    records["kernel_overlap"] = {"serial_ms": statistics.median(serial) * 1e3,
                                 "two_streams_ms": statistics.median(concurrent) * 1e3,
                                 "overlap": statistics.median(serial) / statistics.median(concurrent)}
    copy_alone, both = [], []
    for _ in range(3):
        start = time.perf_counter()
        device.copy_to_device(host_pinned, stream=streams[1])
        cuda.synchronize()
        copy_alone.append(time.perf_counter() - start)
        start = time.perf_counter()
        busy[1, 1, streams[0]](out, steps)
        device.copy_to_device(host_pinned, stream=streams[1])
        cuda.synchronize()
        both.append(time.perf_counter() - start)
    kernel_s = statistics.median(by_host) / 1e3
    records["copy_compute_overlap"] = {
        "copy_ms": statistics.median(copy_alone) * 1e3, "kernel_ms": kernel_s * 1e3,
        "together_ms": statistics.median(both) * 1e3,
        "overlap": (statistics.median(copy_alone) + kernel_s) / statistics.median(both)}
    records["sizes"] = {"transfer_bytes": nbytes, "busy_steps": steps}
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    simulated = tg.cuda.is_simulated()
    name = "CUDA simulator" if simulated else cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else str(name)
    results = {"what": "GPU runtime costs (benchmarks/gpu_runtime.py)", "device": name,
               "simulated": simulated, "cuda": tg.cuda.describe(),
               "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                   timespec="seconds"),
               "command": " ".join(sys.argv), "records": measure(simulated)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    for key, value in results["records"].items():
        print(f"{key:24} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
