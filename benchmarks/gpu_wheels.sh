#!/usr/bin/env bash
# Download, here, the wheels that benchmarks/gpu_check.sh needs on a GPU machine that
# cannot reach a package index: the pure-Python packages the widgets, the notebooks'
# code and the tests import that such a machine's image (numpy, numba, numba-cuda,
# pytest, hypothesis, matplotlib, PyTorch, CuPy, ...) does not already have.
#
#   benchmarks/gpu_wheels.sh            # -> .whl/ (ignored by git), for Python 3.12 on x86-64
#
# gpu_check.sh installs whatever it finds in .whl/ into a private folder before it runs
# anything (pip --no-index --no-deps --target), so nothing on the machine is changed.
# teachgrad itself travels as source (PYTHONPATH), never as a wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEST=${DEST:-.whl}
PY_VERSION=${PY_VERSION:-3.12}

# Each name with the version range pyproject.toml (or the package needing it) accepts;
# --no-deps below, so every dependency is named here.
PACKAGES=(
  "ipywidgets>=8.1,<9" "comm" "widgetsnbextension>=4,<5" "jupyterlab_widgets>=3,<4"
  "traitlets" "ipython>=8,<10" "ipython_pygments_lexers" "decorator" "jedi" "parso"
  "matplotlib-inline" "pexpect" "ptyprocess" "prompt_toolkit" "wcwidth" "stack_data"
  "asttokens" "executing" "pure_eval"
  "graphviz>=0.20,<1"
  "nbformat" "fastjsonschema" "jsonschema" "jsonschema-specifications" "referencing"
  "rpds-py" "jupyter_core" "platformdirs"
)

mkdir -p "$DEST"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$DEST" \
  --python-version "$PY_VERSION" --implementation cp --abi "cp${PY_VERSION/./}" --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any \
  "${PACKAGES[@]}"
du -sh "$DEST"
ls "$DEST"
