"""Code generation: a chain of elementwise operations becomes one numba kernel.

Eager execution runs ``y = tanh(x * 2 + b)`` as three loops over memory, each
writing a whole temporary array. A fused kernel runs one loop and keeps the
temporaries in registers::

    for i in range(out.size):
        mul = x[i] * c0
        add = mul + b[i]
        out[i] = tanh_f32(add)

The source is generated as text (the learner can read it: ``fn.source``), put
in :mod:`linecache` so tracebacks show its lines, compiled with ``@njit`` on
``cpu`` or as a grid-stride ``@cuda.jit`` kernel on ``cuda``, and cached in
memory by its source text (numba's on-disk cache cannot locate exec'd code).

Three details decide whether the CPU loop is fast (measured in benchmarks/NOTES.md):

* literals are emitted as ``np.float32(...)``: a bare ``2.0`` is a float64 and
  would promote the whole expression to float64;
* ``error_model="numpy"``: under Python's rule ``x / 0`` must raise, and that
  check stops LLVM from turning the loop into SIMD instructions;
* ``math.tanh`` is a call into the scalar C library, which LLVM cannot vectorise
  (numpy's own tanh is SIMD); float32 ``tanh`` (and ``sigmoid``) are emitted as a
  rational function, only ``*``, ``+`` and ``/``, accurate to 4e-7 (sigmoid, built on
  it, to 1e-6 in absolute terms: relatively worse for outputs near 0). ``exp``, ``log``,
  ``sin`` and ``cos`` still call the scalar library: a chain with them fuses, but its
  loop is not vectorised.
"""
from __future__ import annotations

import hashlib
import linecache
from typing import Any

import numpy as np

from ..autograd import grad_mode
from ..autograd.function import Context, Function
from ..ops import elementwise as ew
from .ir import Graph, Node, Ref, identifier

#: How each fusible operation reads as an expression of its operands {0}, {1}.
TEMPLATES: dict[type, str] = {
    ew.Add: "{0} + {1}", ew.Sub: "{0} - {1}", ew.Mul: "{0} * {1}", ew.Div: "{0} / {1}",
    ew.Pow: "{0} ** {1}", ew.Neg: "-{0}", ew.Abs: "math.fabs({0})",
    ew.Exp: "math.exp({0})", ew.Log: "math.log({0})", ew.Sqrt: "math.sqrt({0})",
    ew.Sin: "math.sin({0})", ew.Cos: "math.cos({0})",
    ew.Tanh: "{tanh}({0})", ew.Sigmoid: "{sigmoid}({0})", ew.Relu: "{0} if {0} > zero else zero",
}
FLOAT_DTYPES = ("float32", "float64")

# float32 tanh as p(x)/q(x) on [-7.9, 7.9] (the coefficients of Eigen's ptanh_float),
# beyond which float32 tanh is ±1 anyway.
TANH_F32 = '''
@{jit}
def tanh_f32(x):
    """tanh(x) from *, + and / only, so the loop around it can use SIMD."""
    x = x if x < np.float32(7.90531110763549805) else np.float32(7.90531110763549805)
    x = x if x > np.float32(-7.90531110763549805) else np.float32(-7.90531110763549805)
    x2 = x * x
    p = x2 * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
    p = x2 * p + np.float32(-8.60467152213735e-11)
    p = x2 * p + np.float32(5.12229709037114e-08)
    p = x2 * p + np.float32(1.48572235717979e-05)
    p = x2 * p + np.float32(6.37261928875436e-04)
    p = x2 * p + np.float32(4.89352455891786e-03)
    q = x2 * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
    q = x2 * q + np.float32(2.26843463243900e-03)
    q = x2 * q + np.float32(4.89352518554385e-03)
    return x * p / q
'''
SIGMOID_F32 = '''
@{jit}
def sigmoid_f32(x):
    """σ(x) = (1 + tanh(x/2)) / 2: the vectorisable tanh again."""
    return np.float32(0.5) * tanh_f32(np.float32(0.5) * x) + np.float32(0.5)
'''
SIGMOID_EXACT = '''
@{jit}
def sigmoid_exact(x):
    """σ(x), split by sign so exp never overflows."""
    e = math.exp(-math.fabs(x))
    return {one} / ({one} + e) if x >= {zero} else e / ({one} + e)
'''

_KERNELS: dict[tuple[str, str], Any] = {}  # (device, source) -> compiled kernel
_STATS = {"hits": 0, "misses": 0}


def cache_info() -> dict[str, int]:
    """How often a fused kernel came from the in-memory cache (hits) or was compiled."""
    return {**_STATS, "size": len(_KERNELS)}


def clear_cache() -> None:
    _KERNELS.clear()
    _STATS.update(hits=0, misses=0)


def fusible(node: Node, graph: Graph) -> bool:
    """Can ``node`` go into a fused kernel? An elementwise op on float values that all have
    its own shape, dtype and device (no broadcasting), with plain numbers for the rest."""
    if node.target not in TEMPLATES or node.kwargs or node.multi or len(node.meta) != 1:
        return False
    meta = node.meta[0]
    if meta.dtype not in FLOAT_DTYPES or not node.args:
        return False
    if node.target is ew.Pow and not isinstance(node.args[0], Ref):
        return False
    for a in node.args:
        if isinstance(a, Ref):
            if graph.node(a.node).meta[a.index or 0] != meta:
                return False
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            return False
    return True


RESERVED = frozenset(("math", "np", "cuda", "njit", "i", "start", "stride", "zero"))


def _local(name: str) -> str:
    """A node name as a local variable of the kernel (never one of the kernel's own names)."""
    name = identifier(name)
    return "v_" + name if name in RESERVED or (name[0] == "c" and name[1:].isdigit()) else name


def _var(ref: Ref) -> str:
    return _local(ref.node if ref.index is None else f"{ref.node}_{ref.index}")


def kernel_source(kernel: str, members: list[Node], inputs: list[Ref], outputs: list[str],
                  dtype: str, device: str) -> str:
    """The Python source of one fused kernel (see the module docstring for its shape)."""
    f32 = dtype == "float32"
    jit = "cuda.jit(device=True)" if device == "cuda" else 'njit(error_model="numpy")'
    if device == "cuda":
        helpers = {"tanh": "math.tanh", "sigmoid": "sigmoid_exact"}
    elif f32:
        helpers = {"tanh": "tanh_f32", "sigmoid": "sigmoid_f32"}
    else:
        helpers = {"tanh": "math.tanh", "sigmoid": "sigmoid_exact"}
    literal = (lambda v: f"np.float32({float(v)!r})") if f32 else (lambda v: repr(float(v)))

    constants: dict[float, str] = {}
    body = []
    for m in members:
        operands = []
        for a in m.args:
            if isinstance(a, Ref):
                operands.append(_var(a))
            else:
                constants.setdefault(float(a), f"c{len(constants)}")
                operands.append(constants[float(a)])
        body.append(f"{_local(m.name)} = " + TEMPLATES[m.target].format(*operands, **helpers))
    used = " ".join(body)
    lines = [f"# Generated by tg.compile: {' -> '.join(m.target.__name__ for m in members)} "
             f"fused into one loop ({dtype} on {device}).",
             "import math", "import numpy as np",
             "from numba import cuda" if device == "cuda" else "from numba import njit"]
    if "tanh_f32" in used or "sigmoid_f32" in used:
        lines.append(TANH_F32.format(jit=jit))
    if "sigmoid_f32" in used:
        lines.append(SIGMOID_F32.format(jit=jit))
    if "sigmoid_exact" in used:
        lines.append(SIGMOID_EXACT.format(jit=jit, one=literal(1.0), zero=literal(0.0)))
    params = [f"{_var(r)}_in" for r in inputs] + [f"{_local(o)}_out" for o in outputs]
    first_out = params[len(inputs)]
    if device == "cuda":
        lines += ["", "@cuda.jit", f"def {kernel}({', '.join(params)}):",
                  "    start = cuda.grid(1)  # this thread's first element",
                  "    stride = cuda.gridsize(1)  # threads in the whole grid"]
        loop = f"    for i in range(start, {first_out}.size, stride):"
    else:
        lines += ["", '@njit(error_model="numpy")  # x/0 gives inf, as in numpy: lets the loop use SIMD',
                  f"def {kernel}({', '.join(params)}):"]
        loop = f"    for i in range({first_out}.size):"
    zero = literal(0.0)
    if "zero" in used:
        lines.append(f"    zero = {zero}")
    lines += [f"    {name} = {literal(v)}" for v, name in constants.items()]
    lines.append(loop)
    lines += [f"        {_var(r)} = {_var(r)}_in[i]" for r in inputs]
    lines += [f"        {b}" for b in body]
    lines += [f"        {_local(o)}_out[i] = {_local(o)}" for o in outputs]
    return "\n".join(lines) + "\n"


def compile_kernel(kernel: str, source: str, device: str) -> Any:
    """The compiled kernel for ``source``, from the cache when the same source was seen."""
    key = (device, source)
    if key in _KERNELS:
        _STATS["hits"] += 1
        return _KERNELS[key]
    _STATS["misses"] += 1
    filename = f"<teachgrad-fused-{hashlib.sha1(source.encode()).hexdigest()[:10]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    _KERNELS[key] = namespace[kernel]
    return namespace[kernel]


def _launch(kernel: Any, arrays: list, shape: tuple, dtype: str, n_out: int, backend: Any,
            device: str) -> list:
    """Run a fused kernel on flat contiguous views of ``arrays``; its fresh outputs."""
    if device == "cuda":
        from ..kernels.elementwise import launch_config
        from ..kernels.launch import launch
        from ..kernels.strided import new_array
        flat = [backend.contiguous(a) for a in arrays]
        outs = [new_array(shape, np.dtype(dtype)) for _ in range(n_out)]
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            blocks, threads = launch_config(n)
            launch(kernel, blocks, threads, *[a.buffer[a.offset:a.offset + n] for a in flat],
                   *[o.buffer[:n] for o in outs])
        return outs
    outs = [np.empty(shape, dtype) for _ in range(n_out)]
    kernel(*[np.ascontiguousarray(a).reshape(-1) for a in arrays], *[o.reshape(-1) for o in outs])
    return outs


def make_fused_function(members: list[Node], inputs: list[Ref], outputs: list[str]) -> type:
    """A new Function class that runs ``members`` as one kernel.

    Its backward recomputes the members with their own Functions and runs their
    recorded backward (as activation checkpointing does): the gradients are exactly
    eager's, and the fused forward stays one loop with nothing saved in between.
    """
    meta = members[0].meta[0]
    kernel = "fused_" + "_".join(m.name for m in members[:3])
    source = kernel_source(kernel, members, inputs, outputs, meta.dtype, meta.device)
    compiled = compile_kernel(kernel, source, meta.device)
    position = {r: i for i, r in enumerate(inputs)}

    def run_eager(tensors: tuple) -> list:
        """The members, one Function at a time (what the kernel computes, op by op)."""
        env: dict[str, Any] = {}

        def value(a: Any) -> Any:
            if not isinstance(a, Ref):
                return a
            return tensors[position[a]] if a in position else env[a.node]
        for m in members:
            env[m.name] = m.target.apply(*[value(a) for a in m.args])
        return [env[o] for o in outputs]

    def launch_arrays(backend: Any, arrays: list) -> Any:
        """The kernel on backend arrays: its output array, or a tuple of them."""
        outs = _launch(compiled, arrays, meta.shape, meta.dtype, len(outputs), backend, meta.device)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def forward(ctx: Context, *tensors: Any) -> Any:
        ctx.save_for_backward(*tensors)
        return launch_arrays(ctx.backend, [t._array for t in tensors])

    def backward(ctx: Context, *grads: Any) -> tuple:
        from ..autograd import backward as run_backward
        saved = ctx.saved_tensors
        with grad_mode.enable_grad():
            leaves = [t.detach().requires_grad_(need) for t, need in zip(saved, ctx.needs_input_grad)]
            outs = run_eager(tuple(leaves))
            pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
            if pairs:
                run_backward([o for o, _ in pairs], [g for _, g in pairs])
        return tuple(leaf.grad if need else None for leaf, need in zip(leaves, ctx.needs_input_grad))

    rule = "backward recomputes " + " → ".join(m.target.__name__ for m in members) + \
        " and runs their own backward"
    return type(kernel, (Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward), "rule": rule,
        "generated": True, "source": source, "kernel": compiled, "members": tuple(members),
        "run_eager": staticmethod(run_eager), "launch_arrays": staticmethod(launch_arrays),
        "__module__": __name__,
    })


def fused_kernels(graph: Graph) -> list[type]:
    """The generated Functions in ``graph``, in order."""
    return [n.target for n in graph.operations() if getattr(n.target, "generated", False)]


__all__ = ["TEMPLATES", "cache_info", "clear_cache", "fusible", "kernel_source",
           "make_fused_function", "fused_kernels"]
