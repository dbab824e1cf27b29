"""Every kernel of the package compiles for a real GPU, checked without one.

The simulator runs kernels as Python, so it accepts code numba cannot compile for a
device: a call to a host function inside a kernel, a float16 constant that NVVM
rejects. ``python -m teachgrad.kernels.compile_check`` compiles each kernel to PTX for
sm_90 with the argument types its launcher passes (numba's NVVM and NVRTC, from the
``ptx`` extra; no GPU). These tests run it, and check that no ``@cuda.jit`` kernel of
the package is missing from it, so a new kernel cannot skip the check.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Kernels the check cannot compile, and why.
NOT_COMPILED = {
    ("teachgrad.exercises.kernel_runs", "fn"): "a learner's kernel, made when a checker runs it",
}


def _is_cuda_jit(node: ast.AST) -> bool:
    """``cuda.jit`` or ``cuda.jit(...)``."""
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Attribute) and target.attr == "jit"
            and isinstance(target.value, ast.Name) and target.value.id == "cuda")


def _device_only(node: ast.AST) -> bool:
    """``cuda.jit(device=True)``: a device function, compiled inside the kernels calling it."""
    return isinstance(node, ast.Call) and any(
        k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value
        for k in node.keywords)


def kernels_in_package() -> set[tuple[str, str]]:
    """(module, function) of every kernel in ``teachgrad/``: functions decorated with
    ``@cuda.jit`` and functions a factory passes to ``cuda.jit(fn)``."""
    found = set()
    for path in sorted((ROOT / "teachgrad").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                if any(_is_cuda_jit(d) and not _device_only(d) for d in node.decorator_list):
                    found.add((module, node.name))
            elif (isinstance(node, ast.Call) and _is_cuda_jit(node) and not _device_only(node)
                  and node.args and isinstance(node.args[0], ast.Name)):
                found.add((module, node.args[0].id))
    return found


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TEACHGRAD_CUDA", "NUMBA_ENABLE_CUDASIM")} | env
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=1200)


@pytest.fixture(scope="module")
def compiled() -> subprocess.CompletedProcess:
    # TEACHGRAD_CUDA=sim, as in the test suite: the check must start itself again for
    # the GPU (the simulator's tile sizes and kernels would be the wrong ones)
    return _run(["-m", "teachgrad.kernels.compile_check", "--verbose"], TEACHGRAD_CUDA="sim")


def test_every_kernel_compiles_for_sm_90(compiled):
    output = compiled.stdout + compiled.stderr
    assert compiled.returncode == 0, output[-6000:]
    done = re.search(r"^(\d+)/(\d+) kernels compiled for sm_90 ", compiled.stdout, re.M)
    assert done and done.group(1) == done.group(2), output[-6000:]
    assert int(done.group(2)) >= 300  # every dtype, operation and variant the launchers make


def test_no_kernel_of_the_package_is_left_out(compiled):
    seen = set(re.findall(r"^ok .* \(([\w.]+):(\w+)\)$", compiled.stdout, re.M))
    missing = kernels_in_package() - set(NOT_COMPILED) - seen
    assert not missing, f"kernels compile_check does not compile: {sorted(missing)}"
    # the GPU's sizes, not the simulator's (8 x 8): the tiled attention in 64 x 32 tiles
    assert re.search(r"^ok flash attention forward head_dim 64 tiles 64x32 .*"
                     r"\(teachgrad\.kernels\.attention:flash_attention_forward\)$",
                     compiled.stdout, re.M)
    # tg.compile's generated kernels, forward and backward, in both dtypes
    for dtype in ("float32", "float64"):
        generated = re.findall(rf"^ok generated (fused_\w+) {dtype}", compiled.stdout, re.M)
        assert any(name.endswith("_backward") for name in generated)
        assert any(not name.endswith("_backward") for name in generated)


def test_the_scan_finds_both_kinds_of_kernel():
    found = kernels_in_package()
    assert ("teachgrad.kernels.attention_naive", "softmax_rows_kernel") in found  # @cuda.jit
    assert ("teachgrad.kernels.attention", "flash_attention_forward") in found  # cuda.jit(fn)
    assert not any(name in ("online_softmax_update", "copy_tile") for _, name in found)  # device
    assert set(NOT_COMPILED) <= found  # (an entry that no longer exists would hide nothing)


def test_a_kernel_that_only_the_simulator_runs_fails_the_check():
    script = textwrap.dedent("""
        import os, sys
        os.environ["TEACHGRAD_CUDA"] = "gpu"
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        import numpy as np
        from numba import cuda, from_dtype, types
        from teachgrad.kernels import compile_check

        def fine(x):
            x[0] = 1.0

        def host_call_inside(x):  # from_dtype is a host function: fine in the simulator
            s = cuda.shared.array(4, from_dtype(np.float64))
            s[0] = 1.0
            x[0] = s[0]

        array = types.Array(types.float64, 1, "C")
        compile_check._cases = lambda: iter([("fine", cuda.jit(fine), (array,)),
                                             ("host call", cuda.jit(host_call_inside), (array,))])
        sys.exit(compile_check.main(["--cc", "8.0"]))
    """)
    run = _run(["-c", script])
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"^FAIL host call \(__main__:host_call_inside\): TypingError", run.stdout,
                     re.M)
    assert "1/2 kernels compiled for sm_80" in run.stdout


def test_a_bad_compute_capability_is_refused():
    run = _run(["-m", "teachgrad.kernels.compile_check", "--cc", "nine"], TEACHGRAD_CUDA="gpu")
    assert run.returncode == 2
    assert "--cc takes MAJOR.MINOR, e.g. 9.0, not 'nine'" in run.stderr
