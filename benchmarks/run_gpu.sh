#!/usr/bin/env bash
# Run the whole benchmark suite on a real GPU and write the results file
# benchmarks/results/gpu-<device>-<date>.json (plus the CPU sweeps of the same machine).
#
#   benchmarks/run_gpu.sh                 # the full suite: up to 4096^3 matmul, 2^28-element arrays
#   benchmarks/run_gpu.sh --quick         # fewer sizes (a smoke test of the GPU code paths)
#   PYTHON=/opt/venv/bin/python benchmarks/run_gpu.sh --ops matmul
#
# Needs numba-cuda and a CUDA driver; CuPy or PyTorch (whichever is installed)
# provides the cuBLAS ceiling. Refuses to run in numba's CUDA simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TEACHGRAD_CUDA=gpu   # a real GPU or a clear error, never the simulator

"$PYTHON" - <<'PY'
import sys
import teachgrad as tg
print(tg.cuda.describe())
if tg.cuda.is_simulated() or not tg.cuda.is_available():
    sys.exit("no GPU: run benchmarks/run_gpu.sh on a machine with an NVIDIA GPU")
PY
# the card's state as found (clocks, temperature, other users); never changed
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,utilization.gpu,memory.used \
    --format=csv || true
"$PYTHON" -m teachgrad.bench --out benchmarks/results "$@"
