#!/usr/bin/env bash
# The GPU half on a real GPU, in one run of at most eight minutes:
#
#   1. the tests that exercise `cuda`, with TEACHGRAD_CUDA=gpu (a real GPU or a clear
#      error, never the simulator): kernels against numpy on ragged sizes, the cuda
#      backend, autograd on cuda, streams and events, the compiler's cuda kernels;
#   2. the code of every GPU chapter, reference solutions and checkers included
#      (benchmarks/gpu_chapters.py, one process per chapter);
#   3. `python -m teachgrad.bench --quick` on numpy and cuda (elementwise bandwidth as a
#      fraction of a device-to-device copy, the matmul ladder against cuBLAS), and the
#      runtime costs (benchmarks/gpu_runtime.py: launch latency, transfers, events,
#      stream overlap).
#
#   benchmarks/gpu_check.sh OUT            # on the GPU machine; everything lands in OUT
#   benchmarks/gpu_check.sh --dry-run OUT  # here, in numba's CUDA simulator, tiny sizes:
#                                          # checks the plumbing, measures nothing
#
# OUT receives at most seven files: log.txt (every step's output), summary.txt (one line a
# step: exit status and seconds), tests.xml (JUnit), chapters.json, the bench's
# gpu-<device>-<date>.json, runtime.json and cuda_graph_replay.json. Copy the results files into
# benchmarks/results/ afterwards. Packages the machine lacks travel as wheels in .whl/
# (benchmarks/gpu_wheels.sh makes them here); they are installed into a private folder.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi
OUT=${1:-build/gpu-check}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
: > "$OUT/summary.txt"
: > "$OUT/log.txt"

# (the wheels are built for the GPU machine's Python 3.12: a dry run here does without them)
if [ $DRY_RUN = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then
  SITE=$(mktemp -d /tmp/teachgrad-site.XXXX)
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target "$SITE" .whl/*.whl >> "$OUT/log.txt" 2>&1 || echo "wheels: install failed" >> "$OUT/summary.txt"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 MPLBACKEND=Agg
if [ $DRY_RUN = 1 ]; then export TEACHGRAD_CUDA=sim; else export TEACHGRAD_CUDA=gpu; fi

# step NAME SECONDS COMMAND...: run it under a time limit, log it, note status and time
step() {
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== $name (limit ${limit}s): $*" >> "$OUT/log.txt"
  timeout --kill-after=10 "$limit" "$@" >> "$OUT/log.txt" 2>&1
  local status=$?
  echo "$name: exit $status, $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
}

# The test files that run cuda code (kept in step with the tests/ layout).
CUDA_TESTS=(
  tests/kernels
  tests/execution/test_async_dispatch.py tests/execution/test_async_errors.py
  tests/execution/test_async_streams.py tests/execution/test_jit_compile.py
  tests/engine/test_differential.py tests/engine/test_layers_torch.py
  tests/engine/test_layers_modules.py tests/engine/test_layers_gradcheck.py
  tests/engine/test_inplace_autograd.py tests/engine/test_silent_wrong.py
  tests/execution/test_cuda_graphs.py
)
# (compile_check stands in for a GPU where there is none: here every launch compiles anyway)
# (-rfEs: the log ends with every failure, error and skip, each skip with its reason)
PYTEST=("$PYTHON" -m pytest -q -rfEs -p no:cacheprovider -m "not browser and not slow"
        --junitxml="$OUT/tests.xml" --ignore=tests/kernels/test_compile_check.py
        "${CUDA_TESTS[@]}")

step describe 60 "$PYTHON" -c "import teachgrad as tg; print(tg.cuda.describe())"
if [ $DRY_RUN = 1 ]; then
  step tests 120 "${PYTEST[@]}" --collect-only
  step chapters 120 "$PYTHON" benchmarks/gpu_chapters.py --out "$OUT/chapters.json" \
    --chapters 06_gpu_programming_model
  step bench 120 "$PYTHON" -m teachgrad.bench --quick --include-simulator --no-ceilings \
    --backends numpy cuda --ops add --sizes 1024 --out "$OUT"
else
  command -v nvidia-smi >/dev/null && step nvidia-smi 20 nvidia-smi \
    --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu,memory.used \
    --format=csv
  workers=()
  "$PYTHON" -c "import xdist" 2>/dev/null && workers=(-n 8)
  step tests 200 "${PYTEST[@]}" "${workers[@]}"
  step chapters 110 "$PYTHON" benchmarks/gpu_chapters.py --out "$OUT/chapters.json" --timeout 60
  step bench 100 "$PYTHON" -m teachgrad.bench --quick --backends numpy cuda --out "$OUT"
fi
step runtime 40 "$PYTHON" benchmarks/gpu_runtime.py --out "$OUT/runtime.json"
# host time per training step, eager against a CUDA graph replay (and which replay ran)
step cuda-graphs 60 "$PYTHON" benchmarks/cuda_graph_replay.py --quick --out "$OUT"
echo "files in $OUT:"; ls "$OUT"
