"""Every kernel of the package compiles for a real GPU, checked without one.

The simulator runs kernels as Python, so it accepts code numba cannot compile for a
device: a call to a host function inside a kernel, a float16 constant that NVVM
rejects, or a block that asks for more shared memory or registers than a GPU has.
``python -m teachgrad.kernels.compile_check`` compiles each kernel to PTX for sm_90 with
the argument types its launcher passes, and assembles it with ptxas (numba's NVVM and
NVRTC and CUDA's ptxas, from the ``ptx`` extra; no GPU). These tests run it, and check
that no ``@cuda.jit`` kernel of the package is missing from it, so a new kernel cannot
skip the check.
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
    done = re.search(r"^(\d+)/(\d+) kernels compiled and assembled by ptxas for sm_90 ",
                     compiled.stdout, re.M)
    assert done and done.group(1) == done.group(2), output[-6000:]
    assert int(done.group(2)) >= 300  # every dtype, operation and variant the launchers make


def test_every_block_fits_a_gpu(compiled):
    """What ptxas says each kernel uses, for the largest block its launcher starts: the
    static shared memory within 48 KiB, the registers within 65536 a block."""
    usage = re.findall(r"^ok (.*) \([\w.]+:\w+\): (\d+) registers x (\d+) threads, "
                       r"(\d+) bytes shared", compiled.stdout, re.M)
    assert len(usage) == len(re.findall(r"^ok ", compiled.stdout, re.M)) >= 300
    for name, registers, threads, shared in usage:
        assert int(shared) <= 48 * 1024, name
        assert 0 < int(registers) <= 255 and 1 <= int(threads) <= 1024, name
    by_name = {name: (int(r), int(t), int(b)) for name, r, t, b in usage}
    # float64 attention with head_dim 128: its tiles shrunk to fit (full size would need
    # 64 KiB for the forward and 129 KiB for dK/dV)
    assert by_name["flash attention dK dV head_dim 128 causal=True float64 tiles 16x16"][1:] \
        == (16, 33024)
    assert by_name["flash attention forward head_dim 128 causal=False float64 tiles 64x16 "
                   "record=False"][1:] == (64, 32768)
    assert by_name["tiled matmul float32 record=False"][1:] == (256, 2 * 16 * 16 * 4)


def test_no_kernel_of_the_package_is_left_out(compiled):
    seen = set(re.findall(r"^ok .* \(([\w.]+):(\w+)\)(?::|$)", compiled.stdout, re.M))
    missing = kernels_in_package() - set(NOT_COMPILED) - seen
    assert not missing, f"kernels compile_check does not compile: {sorted(missing)}"
    # the GPU's sizes, not the simulator's (8 x 8): the tiled attention in 64 x 32 tiles
    assert re.search(r"^ok flash attention forward head_dim 64 .* tiles 64x32 .*"
                     r"\(teachgrad\.kernels\.attention:flash_attention_forward\):",
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


def test_kernels_a_gpu_would_refuse_fail_the_check():
    script = textwrap.dedent("""
        import os, sys
        os.environ["TEACHGRAD_CUDA"] = "gpu"
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
        import numpy as np
        from numba import cuda, float64, from_dtype, types
        from teachgrad.kernels import attention, compile_check

        def fine(x):
            x[0] = 1.0

        def host_call_inside(x):  # from_dtype is a host function: fine in the simulator
            s = cuda.shared.array(4, from_dtype(np.float64))
            s[0] = 1.0
            x[0] = s[0]

        def big_tile(x):  # 64 KiB of static shared memory: a block has 48
            s = cuda.shared.array(8192, float64)
            s[cuda.threadIdx.x] = 1.0
            cuda.syncthreads()
            x[0] = s[8191 - cuda.threadIdx.x]

        def small_tile(x):
            s = cuda.shared.array(512, float64)
            s[cuda.threadIdx.x] = 1.0
            cuda.syncthreads()
            x[0] = s[511 - cuda.threadIdx.x]

        understated = cuda.jit(small_tile)
        understated.shared_bytes = 64  # uses 4096: the launch check would be told too little
        array = types.Array(types.float64, 1, "C")
        flash = attention.flash_attention_kernel(64, 64, 32, False)
        f32 = types.Array(types.float32, 3, "C")
        flash_types = (f32, f32, f32, f32, types.Array(types.float32, 2, "C"), types.float32,
                       types.int64, types.int64, types.Array(types.float32, 2, "C"),
                       types.Array(types.float32, 1, "C"), types.Array(types.float32, 2, "C"))
        compile_check._cases = lambda: iter([
            ("fine", cuda.jit(fine), (array,), 1024),
            ("host call", cuda.jit(host_call_inside), (array,), 32),
            ("big tile", cuda.jit(big_tile), (array,), 256),
            ("understated tile", understated, (array,), 256),
            ("flash in 1024 threads", flash, flash_types, 1024),
            ("flash in 64 threads", flash, flash_types, 64)])
        assert compile_check.registers_per_block(64, 1024) == 65536
        assert compile_check.registers_per_block(65, 1024) == 73728  # 9 x 256 a warp
        assert compile_check.registers_per_block(255, 33) == 2 * 8192  # a second, partial warp
        sys.exit(compile_check.main(["--cc", "8.0"]))
    """)
    run = _run(["-c", script])
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert re.search(r"^FAIL host call \(__main__:host_call_inside\): TypingError", out, re.M)
    assert re.search(r"^FAIL big tile \(__main__:big_tile\): ptxas: .*too much shared data "
                     r"\(0x10000 bytes, 0xc000 max\)", out, re.M), out
    assert re.search(r"^FAIL understated tile .*: \d+ registers x 256 threads, 4096 bytes shared: "
                     r"it declares 64 bytes", out, re.M), out
    assert re.search(r"^FAIL flash in 1024 threads .*: (\d+) registers x 1024 threads, 16384 "
                     r"bytes shared: a block needs \d+ registers, over the 65536", out, re.M), out
    assert not re.search(r"^FAIL (fine|flash in 64 threads)", out, re.M), out
    assert "2/6 kernels compiled and assembled by ptxas for sm_80" in out


def test_a_bad_compute_capability_is_refused():
    run = _run(["-m", "teachgrad.kernels.compile_check", "--cc", "nine"], TEACHGRAD_CUDA="gpu")
    assert run.returncode == 2
    assert "--cc takes MAJOR.MINOR, e.g. 9.0, not 'nine'" in run.stderr
