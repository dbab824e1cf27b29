"""Compile every kernel for a real GPU, without one: ``python -m teachgrad.kernels.compile_check``.

The CUDA simulator runs kernels as plain Python, so it never type-checks them
the way numba does for a GPU: a kernel can pass every simulator test and still
fail to compile on a real device. This script compiles each kernel factory's
kernels to PTX (for compute capability 9.0 by default) with the argument types
the launchers pass: the elementwise, reduction, indexing and sort kernels, the
matmul ladder, attention (naive, tiled forward, backward), the tensor-core model,
the engine's parts of the build track, the stream's busy kernel, and the kernels
``tg.compile`` generates (forward and backward) for a graph of every fusible
operation. ``tests/kernels/test_compile_check.py`` runs it and checks that every
``@cuda.jit`` kernel in the package is among them.

Each PTX is then assembled by ``ptxas`` for the same architecture, as the driver does
at a kernel's first launch. That is where a GPU refuses what the simulator allows: more
than 48 KiB of static shared memory in a block. The registers ptxas reports are checked
against the largest block the launcher starts (65536 registers a block), and a factory's
``shared_bytes`` (what :func:`.launch.check_launch` is told) against the shared memory
the kernel really has.

It needs numba's CUDA toolchain (the NVVM and NVRTC libraries and ptxas: the ``ptx``
extra, ``pip install -e ".[ptx]"``) but no GPU, and it must run without the simulator,
so it sets ``TEACHGRAD_CUDA=gpu`` before importing teachgrad.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ["TEACHGRAD_CUDA"] = "gpu"
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
if "teachgrad._cuda_setup" in sys.modules and sys.modules["teachgrad._cuda_setup"].is_simulated():
    # ``python -m`` imported teachgrad (this module's package) before the lines above could
    # ask for the GPU: it chose the simulator, and with it the simulator's tile sizes and
    # kernels. Start again, with the environment set first.
    os.execv(sys.executable, [sys.executable, "-m", "teachgrad.kernels.compile_check",
                              *sys.argv[1:]])

import numpy as np  # noqa: E402
from numba import cuda, from_dtype, types  # noqa: E402

from teachgrad.exercises import ch08  # noqa: E402
from teachgrad.kernels import (  # noqa: E402
    attention, attention_backward, attention_naive, elementwise, indexing, matmul, ops, parts,
    race, reduce, sort, tensor_core,
)

_INT = types.int64


def _array(dtype, ndim: int, layout: str = "C") -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, layout)


def _layout(ndim: int):
    return (_INT, types.UniTuple(_INT, ndim))  # offset, strides


def _operand(kind: str, dtype, ndim: int):
    value = from_dtype(np.dtype(dtype)) if kind == "scalar" else _array(dtype, 1)
    return (value, *_layout(ndim))


def _cases():
    """(name, kernel, argument types, threads per block) for every kernel the launchers can
    build, with the largest block they launch it with."""
    nd = 2
    flat = elementwise.THREADS_PER_BLOCK
    shape = types.UniTuple(_INT, nd)
    owners = _array(np.int32, 2)
    for dtype in (np.float32, np.float64):
        for op in ops.UNARY:
            for kind in ("contiguous", "strided"):
                for rec in (False, True):
                    yield (f"map {op} {kind} {np.dtype(dtype)} record={rec}",
                           elementwise.map_kernel(op, kind, rec),
                           (_array(dtype, 1), _INT, *_operand(kind, dtype, nd), shape, owners),
                           flat)
        for op in ops.BINARY:
            out = np.bool_ if op in ("eq", "ne", "lt", "le", "gt", "ge") else dtype
            for a_kind, b_kind in (("strided", "strided"), ("contiguous", "scalar"),
                                   ("scalar", "contiguous")):
                yield (f"zip {op} {a_kind}/{b_kind} {np.dtype(dtype)}",
                       elementwise.zip_kernel(op, a_kind, b_kind, False),
                       (_array(out, 1), _INT, *_operand(a_kind, dtype, nd),
                        *_operand(b_kind, dtype, nd), shape, owners), flat)
        yield (f"where {np.dtype(dtype)}", elementwise.where_kernel("strided", "contiguous", "scalar"),
               (_array(dtype, 1), _INT, *_operand("strided", np.bool_, nd),
                *_operand("contiguous", dtype, nd), *_operand("scalar", dtype, nd), shape), flat)
        for op in ("sum", "max", "min"):
            yield (f"reduce {op} {np.dtype(dtype)}", reduce.reduce_kernel(op, np.dtype(dtype), 256),
                   (_array(dtype, 2), _array(dtype, 2), _INT, _INT), reduce.THREADS_PER_BLOCK)
        for op in ("argmax", "argmin"):
            yield (f"{op} {np.dtype(dtype)}", reduce.arg_reduce_kernel(op, np.dtype(dtype), 256),
                   (_array(dtype, 2), _array(np.int64, 1), _INT, _INT), reduce.THREADS_PER_BLOCK)
        mats = (_array(dtype, 3),) * 3
        counts = _array(np.int64, 1)
        for rec in (False, True):
            yield (f"naive matmul {np.dtype(dtype)} record={rec}",
                   matmul.naive_kernel(np.dtype(dtype), rec), (*mats, counts), 16 * 16)
            yield (f"tiled matmul {np.dtype(dtype)} record={rec}",
                   matmul.tiled_kernel(np.dtype(dtype), matmul.TILE, rec),
                   (*mats, counts, _array(np.int32, 6), _array(np.int32, 6)), matmul.TILE ** 2)
            register = matmul.register_kernel(np.dtype(dtype), matmul.REGISTER_BLOCK,
                                              matmul.REGISTER_PER_THREAD, rec)
            yield (f"register matmul {np.dtype(dtype)} record={rec}", register, (*mats, counts),
                   register.threads[0] * register.threads[1])
        plan = (shape, shape, _INT, _INT, _array(np.int64, 2),
                types.UniTuple(_INT, 1), types.UniTuple(_INT, 1))
        yield (f"gather {np.dtype(dtype)}", indexing.gather_kernel(),
               (_array(dtype, 1), _INT, _array(dtype, 1), *plan), flat)
        for acc in (False, True):
            yield (f"scatter accumulate={acc} {np.dtype(dtype)}", indexing.scatter_kernel(acc),
                   (_array(dtype, 1), _INT, _array(dtype, 1), *plan), flat)
    for src, dst in ((np.float32, np.bool_), (np.float64, np.int64), (np.bool_, np.float32),
                     (np.int64, np.float64)):
        yield (f"copy {np.dtype(src)} -> {np.dtype(dst)}", elementwise.copy_kernel("strided"),
               (_array(dst, 1), *_layout(nd), _INT, *_operand("strided", src, nd), shape), flat)
    yield ("fill", elementwise.copy_kernel("scalar"),
           (_array(np.float32, 1), *_layout(nd), _INT, *_operand("scalar", np.float32, nd), shape),
           flat)
    # (recording reuses the elementwise and matmul kernels: nothing extra to compile)
    yield from race.compile_cases()
    yield from _attention_cases()
    yield from _other_cases()
    yield from _generated_cases()


def _attention_cases():
    """The naive attention's three kernels, the tiled forward (plain and recording one row)
    and the two backward kernels, for the head dimensions and the tiles the launchers
    choose when none are given (:func:`.attention.key_tile`,
    :func:`.attention_backward.query_tile`)."""
    f32 = from_dtype(np.dtype(np.float32))
    heads3 = _array(np.float32, 3)
    square = attention_naive.THREADS ** 2
    for causal in (False, True):
        yield (f"naive attention scores causal={causal}", attention_naive.scores_kernel(causal),
               (heads3, heads3, heads3, f32), square)
    yield ("naive attention softmax rows", attention_naive.softmax_rows_kernel, (heads3, heads3),
           attention_naive.THREADS)
    yield ("naive attention weighted sum", attention_naive.weighted_sum_kernel, (heads3,) * 3,
           square)
    for dtype in (np.float32, np.float64):
        value = from_dtype(np.dtype(dtype))
        a3, a2, a1 = _array(dtype, 3), _array(dtype, 2), _array(dtype, 1)
        for head_dim in (32, 64, 96, attention.MAX_HEAD_DIM):
            rows, keys = attention.BLOCK_Q, attention.key_tile(head_dim, dtype)
            dkdv_rows = attention_backward.query_tile(head_dim, dtype)
            for causal in (False, True):
                tag = f"head_dim {head_dim} causal={causal} {np.dtype(dtype)}"
                for record in (False, True):
                    yield (f"flash attention forward {tag} tiles {rows}x{keys} record={record}",
                           attention.flash_attention_kernel(
                               head_dim, rows, keys, causal,
                               attention.online_softmax_update, record, np.dtype(dtype)),
                           (a3, a3, a3, a3, a2, value, _INT, _INT, a2, a1, a2), rows)
                yield (f"flash attention dQ {tag} tiles {rows}x{keys}",
                       attention_backward.dq_kernel(head_dim, rows, keys, causal, np.dtype(dtype)),
                       (a3, a3, a3, a3, a2, a3, a3, a2, value), rows)
                yield (f"flash attention dK dV {tag} tiles {dkdv_rows}x{keys}",
                       attention_backward.dkdv_kernel(head_dim, dkdv_rows, keys, causal,
                                                      np.dtype(dtype)),
                       (a3, a3, a3, a2, a3, a2, a3, a3, value), keys)


def _other_cases():
    """The tensor-core model, the sort, the build track's engine parts, the busy kernel."""
    for fragment in tensor_core.FRAGMENTS:
        yield (f"tensor core matmul fragment {fragment}", tensor_core.mma_kernel(fragment),
               (_array(np.float16, 3), _array(np.float16, 3), _array(np.float32, 3),
                _array(np.int64, 1)), tensor_core.WARP)
    for dtype in (np.float32, np.float64, np.int64):
        yield (f"rank sort {np.dtype(dtype)}", sort.rank_sort_kernel(),
               (_array(dtype, 2), _array(dtype, 2), _array(np.int64, 2), _INT, _INT,
                types.boolean), elementwise.THREADS_PER_BLOCK)
    for dtype in (np.float32, np.float64):
        for op, fn in ops.UNARY.items():
            yield (f"part map {op} {np.dtype(dtype)}", parts.engine_map(fn),
                   (_array(dtype, 1), _array(dtype, 1)), elementwise.THREADS_PER_BLOCK)
        # (a plugged reduction or matmul receives views into guarded buffers: layout "A")
        yield (f"part block sum {np.dtype(dtype)}", parts.engine_block_sum,
               (_array(dtype, 2, "A"), _array(dtype, 2, "A")), parts.REDUCE_THREADS)
        yield (f"part tiled matmul {np.dtype(dtype)}", parts.engine_matmul(parts.MATMUL_TILE),
               (_array(dtype, 2, "A"),) * 3, parts.MATMUL_TILE ** 2)
    yield ("exercise 8.2's tiled kernel around a load step",
           ch08.tiled_matmul_with(_load_phase, 8), (_array(np.float64, 2),) * 3, 8 * 8)
    from teachgrad.streams.busy import _busy_kernel

    yield ("stream busy kernel", _busy_kernel(), (types.float64,), 1)


@cuda.jit(device=True)
def _load_phase(A, B, a_tile, b_tile, row, col, phase):
    """A load step of the shape exercise 8.2 asks for (the checker's kernel calls the
    learner's): this thread's slot of both tiles, zeros past an edge."""
    tile = a_tile.shape[0]
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    k_a, k_b = phase * tile + tx, phase * tile + ty
    a_tile[ty, tx] = A[row, k_a] if row < A.shape[0] and k_a < A.shape[1] else 0.0
    b_tile[ty, tx] = B[k_b, col] if k_b < B.shape[0] and col < B.shape[1] else 0.0


def _generated_cases():
    """The kernels ``tg.compile`` generates on ``cuda``, forward and backward for every
    combination of inputs needing a gradient, for a graph with every fusible operation.

    The graph is traced on ``cpu`` tensors (there is no GPU to make ``cuda`` ones on);
    each fused region's sources are then generated for ``cuda``, as they would be there.
    """
    import teachgrad as tg
    from teachgrad.jit import codegen, fused_backward, kernel_text, passes

    def every_operation(x, y):
        a = (x * y + 0.5).tanh() - x.sigmoid() * 0.25
        b = (a.abs() + 1.0).log() + (y.abs() / (x.abs() + 2.0)).sqrt()
        c = a.exp().relu() * b.sin() - (-b).cos() + a ** 2
        return c * x

    regions: list[tuple] = []
    original = passes.make_fused_function

    def spy(members, inputs, outputs):
        regions.append((members, inputs, outputs))
        return original(members, inputs, outputs)

    passes.make_fused_function = spy
    try:
        for dtype in ("float32", "float64"):
            x = tg.randn(5, dtype=getattr(tg, dtype), requires_grad=True)
            y = tg.randn(5, dtype=getattr(tg, dtype), requires_grad=True)
            tg.compile(every_operation)(x, y)
    finally:
        passes.make_fused_function = original
    missing = set(kernel_text.OP_NAMES) - {m.target for members, _, _ in regions for m in members}
    if missing:
        raise RuntimeError("the graph for the generated kernels lost operations: "
                           + ", ".join(sorted(kernel_text.OP_NAMES[t] for t in missing)))
    for members, inputs, outputs in regions:
        dtype = members[0].meta[0].dtype
        region = kernel_text.Region(members, inputs, outputs, dtype, "cuda")
        name = kernel_text.kernel_name(region)
        kernel = codegen.compile_kernel(name, codegen.forward_source(region, name), "cuda")
        arrays = (_array(dtype, 1),) * (len(inputs) + len(outputs))
        yield (f"generated {name} {dtype}", kernel, arrays, elementwise.THREADS_PER_BLOCK)
        for needs in itertools.product((False, True), repeat=len(inputs)):
            if not any(needs):
                continue
            plan = fused_backward.backward_kernel(region, name + "_backward", needs)
            if not plan.grads_for:
                continue
            count = (len(plan.reads_inputs) + plan.reads_output + len(outputs)
                     + len(plan.grads_for))
            yield (f"generated {plan.name} {dtype} needs={needs}",
                   codegen.compile_kernel(plan.name, plan.source, "cuda"),
                   (_array(dtype, 1),) * count, elementwise.THREADS_PER_BLOCK)


class _TargetDevice:
    """Stands in for the current device: device functions compile for its capability."""

    def __init__(self, cc: tuple[int, int]) -> None:
        self.compute_capability = cc


#: Registers of a block's threads together (65536 on every GPU from compute capability 5.0
#: to 10.x), and the unit a warp's registers come in.
REGISTERS_PER_BLOCK, REGISTER_UNIT = 65536, 256


def find_ptxas() -> str | None:
    """The PTX assembler: from the ``nvidia-cuda-nvcc`` wheel (the ``ptx`` extra), or on PATH."""
    try:
        import nvidia.cuda_nvcc as nvcc
    except ImportError:
        roots: list[str] = []
    else:
        roots = list(getattr(nvcc, "__path__", []))
    for root in roots:
        candidate = os.path.join(root, "bin", "ptxas")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("ptxas")


def registers_per_block(registers: int, threads: int) -> int:
    """The registers a block of ``threads`` takes when each thread uses ``registers``: every
    warp (32 threads, the last one too) gets its registers in units of 256."""
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    return -(-threads // 32) * per_warp


def assemble(ptxas: str, ptx: str, cc: tuple[int, int], kernel, threads: int) -> tuple[str, str]:
    """Assemble ``ptx`` for the device as the driver would on the first launch, and check
    the block fits: ``("ok" | "FAIL", what it uses or why it would not launch)``."""
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w", encoding="utf-8") as f:
            f.write(ptx)
        run = subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-v", source,
                              "-o", os.path.join(folder, "kernel.cubin")],
                             capture_output=True, text=True, timeout=600)
    report = run.stdout + run.stderr
    if run.returncode != 0:
        errors = [line for line in report.splitlines() if "error" in line]
        # (an entry function's mangled name is long and says nothing numba's name does not)
        why = re.sub(r"Entry function '[^']*'", "the kernel", (errors or [report.strip()])[0])
        return "FAIL", "ptxas: " + why.split(":", 1)[-1].strip()[:300]
    used = re.search(r"Used (\d+) registers", report)
    registers = int(used.group(1)) if used else 0
    shared = sum(int(n) for n in re.findall(r"(\d+) bytes smem", report))
    spilled = sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", report))
    usage = (f"{registers} registers x {threads} threads, {shared} bytes shared"
             + (f", {spilled} bytes spilled" if spilled else ""))
    block = registers_per_block(registers, threads)
    if block > REGISTERS_PER_BLOCK:
        return "FAIL", (f"{usage}: a block needs {block} registers, over the "
                        f"{REGISTERS_PER_BLOCK} a block can have (the launch would fail with "
                        "'too many resources requested')")
    declared = getattr(kernel, "shared_bytes", None)
    if declared is not None and shared > declared:
        return "FAIL", (f"{usage}: it declares {declared} bytes of shared memory, which the "
                        "launch check trusts")
    return "ok", usage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m teachgrad.kernels.compile_check",
        description="Compile every kernel of the package to PTX and assemble it for the "
                    "device, without a GPU.")
    parser.add_argument("--cc", default="9.0",
                        help="compute capability to compile for, e.g. 8.0 (default 9.0)")
    parser.add_argument("--verbose", action="store_true",
                        help="one line per kernel: ok or FAIL, its case and its Python function, "
                             "and what the block uses")
    args = parser.parse_args(argv)
    try:
        major, minor = (int(part) for part in args.cc.split("."))
    except ValueError:
        parser.error(f"--cc takes MAJOR.MINOR, e.g. 9.0, not {args.cc!r}")
    cc = (major, minor)
    from numba.cuda import dispatcher

    # with no GPU there is no current device to ask which architecture to compile for
    dispatcher.get_current_device = lambda: _TargetDevice(cc)
    ptxas = find_ptxas()
    start = time.perf_counter()
    cases = list(_cases())
    results: list = []
    # (numba compiles one kernel at a time; ptxas runs beside it, in other processes)
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for name, kernel, argtypes, threads in cases:
            fn = kernel.py_func
            where = f"{fn.__module__}:{fn.__name__}"
            try:
                ptx, _ = cuda.compile_ptx(fn, argtypes, cc=cc)
            except Exception as error:  # report every failure, not just the first
                message = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                results.append((name, where, None, message))
                continue
            job = pool.submit(assemble, ptxas, ptx, cc, kernel, threads) if ptxas else None
            results.append((name, where, job, ""))
    failures = 0
    for name, where, job, message in results:
        status, detail = ("FAIL", message) if message else job.result() if job else ("ok", "")
        failures += status == "FAIL"
        if status == "FAIL" or args.verbose:
            print(f"{status} {name} ({where})" + (f": {detail}" if detail else ""))
    assembled = "and assembled by ptxas " if ptxas else ""
    print(f"{len(cases) - failures}/{len(cases)} kernels compiled {assembled}for "
          f"sm_{cc[0]}{cc[1]} in {time.perf_counter() - start:.0f} s")
    if not ptxas:
        print("ptxas was not found (pip install -e '.[ptx]'): registers and shared memory "
              "were not checked")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
