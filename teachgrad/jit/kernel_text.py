"""The pieces every generated kernel is written from: names, expressions, helpers, the loop.

A fused region (see :mod:`teachgrad.jit.codegen`) becomes Python source. Nothing in
that source comes from the graph's own text: node names, file contents and class
names never reach it. Every identifier is made here from a counter (``x0`` for the
first input, ``v2`` for the third operation's value, ``c0`` for the first constant),
operations are spelled from :data:`TEMPLATES`, a fixed table keyed by teachgrad's own
Function classes, and numbers are written by :func:`number_text`, which only ever
prints a float. The kernel's name and its comment read the same fixed table
(:data:`OP_NAMES`), so a kernel is called ``fused_mul_add_tanh`` whatever the nodes
were called.

Both the forward kernel and the backward kernel are built from these pieces, on
``cpu`` (``@njit``) and ``cuda`` (a grid-stride ``@cuda.jit`` kernel). On ``cuda``
the scalar functions are the ones eager ``cuda`` kernels call
(:mod:`teachgrad.kernels.ops`), and every value is rounded to the kernel's dtype
as it is made: the simulator computes in Python floats, a float32 array rounds what
it stores, and a fused kernel must round where eager's arrays would (on a GPU the
cast costs nothing: the value already is a float32).
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..ops import elementwise as ew
from .ir import Node, Ref

#: Teachgrad's own name for each fusible Function: the only operation text a kernel's
#: name or comment may contain.
OP_NAMES: dict[type, str] = {
    ew.Add: "add", ew.Sub: "sub", ew.Mul: "mul", ew.Div: "div", ew.Pow: "pow",
    ew.Neg: "neg", ew.Abs: "abs", ew.Exp: "exp", ew.Log: "log", ew.Sqrt: "sqrt",
    ew.Sin: "sin", ew.Cos: "cos", ew.Tanh: "tanh", ew.Sigmoid: "sigmoid", ew.Relu: "relu",
}

#: How each fusible operation reads as an expression of its operands {0}, {1}. Names in
#: braces ({exp}, {relu}) are the scalar functions of the device and dtype (HELPERS).
TEMPLATES: dict[type, str] = {
    ew.Add: "{0} + {1}", ew.Sub: "{0} - {1}", ew.Mul: "{0} * {1}", ew.Div: "{0} / {1}",
    ew.Pow: "{0} ** {1}", ew.Neg: "-{0}", ew.Abs: "{abs}({0})",
    ew.Exp: "{exp}({0})", ew.Log: "{log}({0})", ew.Sqrt: "{sqrt}({0})",
    ew.Sin: "{sin}({0})", ew.Cos: "{cos}({0})",
    ew.Tanh: "{tanh}({0})", ew.Sigmoid: "{sigmoid}({0})", ew.Relu: "{relu}({0})",
}
FLOAT_DTYPES = ("float32", "float64")

_SCALAR_NAMES = ("abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "step", "sign")
#: The scalar functions each kind of kernel calls. On ``cuda``: eager's own device
#: functions (``math.tanh`` there is libdevice's tanhf, a software routine).
HELPERS: dict[tuple[str, str], dict[str, str]] = {
    ("cpu", "float64"): {"abs": "math.fabs", "exp": "math.exp", "log": "math.log",
                         "sqrt": "math.sqrt", "sin": "math.sin", "cos": "math.cos",
                         "tanh": "math.tanh", "sigmoid": "sigmoid_exact", "relu": "relu",
                         "step": "step", "sign": "sign"},
    ("cuda", "any"): {name: f"scalar.{name}" for name in _SCALAR_NAMES} | {"abs": "scalar.absolute"},
}
HELPERS[("cpu", "float32")] = HELPERS[("cpu", "float64")] | {"tanh": "tanh_f32"}

# float32 tanh as p(x)/q(x) on [-7.9, 7.9] (the coefficients of Eigen's ptanh_float),
# beyond which float32 tanh is ±1 anyway. The clamps are written so that NaN fails
# both comparisons and passes through (tanh(NaN) is NaN).
TANH_F32 = '''
@{jit}
def tanh_f32(x):
    """tanh(x) from *, + and / only, so the loop around it can use SIMD."""
    x = np.float32(7.90531110763549805) if x > np.float32(7.90531110763549805) else x
    x = np.float32(-7.90531110763549805) if x < np.float32(-7.90531110763549805) else x
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
    return x * (p / q)  # (x * p would lose a subnormal x's digits)
'''
SIGMOID_EXACT = '''
@{jit}
def sigmoid_exact(x):
    """σ(x), split by sign so exp never overflows and σ of a very negative x keeps its digits."""
    e = math.exp(-math.fabs(x))
    return {one} / ({one} + e) if x >= {zero} else e / ({one} + e)
'''
RELU = '''
@{jit}
def relu(x):
    """max(x, 0) as numpy's maximum: NaN passes through, -0 becomes 0."""
    return {zero} if x <= {zero} else x
'''
STEP = '''
@{jit}
def step(x):
    """relu's slope, 1 where x > 0 else 0 (0 for NaN too, as eager's mask x > 0)."""
    return {one} if x > {zero} else {zero}
'''
SIGN = '''
@{jit}
def sign(x):
    """numpy's sign: -1, 0 or 1 (+0 for -0 too); NaN stays NaN."""
    if x > {zero}:
        return {one}
    if x < {zero}:
        return -{one}
    return {zero} if x == {zero} else x
'''
#: Helper functions a cpu kernel defines when its body calls them (in this order: tanh first,
#: as others may build on it).
CPU_HELPER_SOURCE = {"tanh_f32": TANH_F32, "sigmoid_exact": SIGMOID_EXACT, "relu": RELU,
                     "step": STEP, "sign": SIGN}

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9.]*")


def number_text(value: float) -> str:
    """A float as source text: digits, or math.inf / math.nan (``repr`` would print ``inf``)."""
    value = float(value)
    if math.isnan(value):
        return "math.nan"
    if math.isinf(value):
        return "math.inf" if value > 0 else "-math.inf"
    return repr(value)


class Region:
    """The generated names of one fused region: inputs ``x0..``, values ``v0..``, constants ``c0..``."""

    def __init__(self, members: list[Node], inputs: list[Ref], outputs: list[str],
                 dtype: str, device: str) -> None:
        self.members, self.inputs, self.dtype, self.device = members, inputs, dtype, device
        self.input_var = {r: f"x{j}" for j, r in enumerate(inputs)}
        self.member_var = {m.name: f"v{k}" for k, m in enumerate(members)}
        self.outputs = [self.member_var[o] for o in outputs]  # the values the region hands out
        # keyed by their text: 0.0 and -0.0 are equal as dict keys, and NaN is not even itself
        self.constants: dict[str, str] = {}
        for m in members:
            for a in m.args:
                if not isinstance(a, Ref) and number_text(a) not in self.constants:
                    self.constants[number_text(a)] = f"c{len(self.constants)}"
        self.helpers = HELPERS[(device, "any" if device == "cuda" else dtype)]
        self.op_names = [OP_NAMES[m.target] for m in members]

    def operand(self, a: Any) -> str:
        """The variable holding operand ``a``: an input's, a member's, or a constant's."""
        if not isinstance(a, Ref):
            return self.constants[number_text(a)]
        return self.input_var.get(a) or self.member_var[a.node]

    def literal(self, value: float | str) -> str:
        """A number (or its :func:`number_text`) in the kernel's dtype: a bare 2.0 would make
        float32 arithmetic float64."""
        text = value if isinstance(value, str) else number_text(value)
        if self.dtype == "float32":
            return f"np.float32({text})"
        return f"np.float64({text})" if self.device == "cuda" else text

    def rounded(self, expr: str) -> str:
        """``expr`` rounded to the dtype on cuda (see the module docstring); as is on cpu."""
        return f"np.{self.dtype}({expr})" if self.device == "cuda" else expr

    def expression(self, member: Node) -> str:
        """The forward value of ``member`` as an expression of its operands' variables."""
        operands = [self.operand(a) for a in member.args]
        return TEMPLATES[member.target].format(*operands, **self.helpers)

    def comment(self) -> str:
        return " -> ".join(self.op_names) + f" ({self.dtype} on {self.device})"


def kernel_name(region: Region, suffix: str = "") -> str:
    """``fused_mul_add_tanh``: from the fixed op-name table, never from node names."""
    return "fused_" + "_".join(region.op_names[:3]) + suffix


def kernel_module(region: Region, name: str, comment: list[str], params: list[str],
                  setup: list[str], body: list[str]) -> str:
    """A whole generated module: imports, the helpers ``body`` calls, and the kernel's loop.

    ``setup`` runs once per call and sets ``n``, the number of elements; ``body`` runs
    once per element ``i`` (on cuda, for this thread's elements: a grid-stride loop).
    """
    cuda = region.device == "cuda"
    lines = [f"# {c}" for c in comment] + ["import math", "import numpy as np"]
    if cuda:
        lines += ["from numba import cuda", "from teachgrad.kernels import ops as scalar"]
    else:
        lines.append("from numba import njit")
        used = set(_WORD.findall("\n".join(body)))
        jit = 'njit(error_model="numpy")'
        one, zero = region.literal(1.0), region.literal(0.0)
        for helper, text in CPU_HELPER_SOURCE.items():
            if helper in used:
                lines.append(text.format(jit=jit, one=one, zero=zero))
    if cuda:
        lines += ["", "@cuda.jit", f"def {name}({', '.join(params)}):",
                  "    start = cuda.grid(1)  # this thread's first element",
                  "    stride = cuda.gridsize(1)  # threads in the whole grid"]
    else:
        lines += ["", '@njit(error_model="numpy")  # x/0 gives inf, as in numpy: lets the loop use SIMD',
                  f"def {name}({', '.join(params)}):"]
    lines += [f"    {s}" for s in setup]
    lines.append("    for i in range(start, n, stride):" if cuda else "    for i in range(n):")
    lines += [f"        {b}" for b in body]
    return "\n".join(lines) + "\n"


def constant_lines(region: Region) -> list[str]:
    return [f"{name} = {region.literal(text)}" for text, name in region.constants.items()]


__all__ = ["OP_NAMES", "TEMPLATES", "HELPERS", "FLOAT_DTYPES", "Region", "kernel_name",
           "kernel_module", "constant_lines", "number_text"]
