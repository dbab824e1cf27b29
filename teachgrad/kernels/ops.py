"""The scalar functions behind elementwise kernels, one small device function each.

An elementwise kernel is a loop that applies a scalar function to every
element. The loop (see :mod:`teachgrad.kernels.elementwise`) is written once;
these are the functions it can apply. Each runs on one element, in one GPU
thread. They follow numpy's answers at the edges (``log(0) = -inf``,
``sqrt(-1) = nan``, NaN passes through ``maximum``), checked against numpy by
the tests.
"""
from __future__ import annotations

import math

from numba import cuda

# -- one argument ---------------------------------------------------------------

@cuda.jit(device=True)
def neg(x):
    return -x


@cuda.jit(device=True)
def exp(x):
    if x > 709.0:  # past float64's range: inf, as numpy gives
        return math.inf
    return math.exp(x)


@cuda.jit(device=True)
def log(x):
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return math.nan  # negative or NaN


@cuda.jit(device=True)
def sqrt(x):
    if x >= 0:
        return math.sqrt(x)
    return math.nan


@cuda.jit(device=True)
def absolute(x):
    return abs(x)


@cuda.jit(device=True)
def sin(x):
    if math.isinf(x):  # NaN, as numpy and a GPU give (Python's math.sin, the simulator's, raises)
        return math.nan
    return math.sin(x)


@cuda.jit(device=True)
def cos(x):
    if math.isinf(x):  # NaN, as for sin
        return math.nan
    return math.cos(x)


@cuda.jit(device=True)
def tanh(x):
    return math.tanh(x)


@cuda.jit(device=True)
def sigmoid(x):
    # exp(-|x|) never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below 0
    e = math.exp(-abs(x))
    if x >= 0:
        return 1.0 / (1.0 + e)
    return e / (1.0 + e)


@cuda.jit(device=True)
def relu(x):
    if x > 0 or x != x:  # x != x only for NaN, which passes through
        return x
    return 0


@cuda.jit(device=True)
def sign(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    if x == 0:
        return 0
    return x  # NaN


@cuda.jit(device=True)
def step(x):
    if x > 0:
        return 1
    return 0


@cuda.jit(device=True)
def erf(x):
    return math.erf(x)


@cuda.jit(device=True)
def log1p(x):
    if x > -1:
        return math.log1p(x)
    if x == -1:
        return -math.inf
    return math.nan  # below -1 or NaN


@cuda.jit(device=True)
def expm1(x):
    if x > 709.0:  # as exp: inf past float64's range
        return math.inf
    return math.expm1(x)


@cuda.jit(device=True)
def identity(x):
    return x


# -- two arguments --------------------------------------------------------------

@cuda.jit(device=True)
def add(a, b):
    return a + b


@cuda.jit(device=True)
def sub(a, b):
    return a - b


@cuda.jit(device=True)
def mul(a, b):
    return a * b


@cuda.jit(device=True)
def div(a, b):
    return a / b


@cuda.jit(device=True)
def power(a, b):
    return a ** b


@cuda.jit(device=True)
def maximum(a, b):
    if a > b or a != a:
        return a
    return b


@cuda.jit(device=True)
def minimum(a, b):
    if a < b or a != a:
        return a
    return b


@cuda.jit(device=True)
def eq(a, b):
    return a == b


@cuda.jit(device=True)
def ne(a, b):
    return a != b


@cuda.jit(device=True)
def lt(a, b):
    return a < b


@cuda.jit(device=True)
def le(a, b):
    return a <= b


@cuda.jit(device=True)
def gt(a, b):
    return a > b


@cuda.jit(device=True)
def ge(a, b):
    return a >= b


UNARY = {
    "neg": neg, "exp": exp, "log": log, "sqrt": sqrt, "abs": absolute,
    "sin": sin, "cos": cos, "tanh": tanh, "sigmoid": sigmoid, "relu": relu,
    "sign": sign, "step": step, "identity": identity,
    "erf": erf, "log1p": log1p, "expm1": expm1,
}
BINARY = {
    "add": add, "sub": sub, "mul": mul, "div": div, "pow": power,
    "maximum": maximum, "minimum": minimum,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
}
