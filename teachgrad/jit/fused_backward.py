"""The backward of a fused region, generated as one loop too.

Eager backward runs one small kernel per operation, each reading and writing whole
arrays. The fused backward does for the region what reverse-mode autodiff does for
a graph, but per element, in registers. For ``tanh(x * 2 + y)``::

    for i in range(n):
        v2 = saved_out0[i]              # tanh's slope needs only its output: the forward kept it
        g_v2 = grad_out0[i]             # the gradient arriving at the region's output
        g_v1 = g_v2 * (one - v2 * v2)   # each operation's slope, last operation first
        g_v0 = g_v1
        g_x1 = g_v1
        g_x0 = g_v0 * c0
        grad_in0[i] = g_x0
        grad_in1[i] = g_x1

A slope that needs a value the forward did not keep (``relu(a * b)`` needs ``a * b``)
reads the region's inputs and recomputes it first (``x0 = in0[i]``, ``v0 = x0 * x1``).

Each slope is eager's own formula (:mod:`teachgrad.ops.elementwise`), written on one
element, so the gradients are eager's up to the order in which a value's gradient
contributions are added. What the kernel reads decides what the forward keeps: the
inputs a slope or a recomputation needs, and the region's output when a slope is
cheaper from it (``tanh``, ``sigmoid``, ``exp``, ``sqrt``: ``1 - t²`` needs ``t``, not
another tanh). Values in between are recomputed, never stored: activation
checkpointing inside one loop.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

from ..ops import elementwise as ew
from .ir import Ref
from .kernel_text import Region, constant_lines, kernel_module

#: The gradient each operand of an operation receives, given the gradient {g} of its
#: value: {a} and {b} are the operands, {out} the value itself. The same formulas as
#: eager's backward, term for term (``grad * 0``, not ``0``, where eager writes
#: ``grad * 0``: a NaN gradient stays NaN).
DERIVATIVES: dict[type, tuple[str, ...]] = {
    ew.Add: ("{g}", "{g}"),
    ew.Sub: ("{g}", "-{g}"),
    ew.Mul: ("{g} * {b}", "{g} * {a}"),
    ew.Div: ("{g} / {b}", "-{g} * (({a} / {b}) / {b})"),
    ew.Pow: ("{g} * {zero} if {b} == {zero} else {g} * {b} * {a} ** ({b} - {one})",
             "{g} * {zero} if {a} == {zero} and {b} >= {zero} else {g} * {out} * {log}({a})"),
    ew.Neg: ("-{g}",),
    ew.Abs: ("{g} * {sign}({a})",),
    ew.Exp: ("{g} * {out}",),
    ew.Log: ("{g} / {a}",),
    ew.Sqrt: ("{g} / ({two} * {out})",),
    ew.Sin: ("{g} * {cos}({a})",),
    ew.Cos: ("-{g} * {sin}({a})",),
    ew.Tanh: ("{g} * ({one} - {out} * {out})",),
    ew.Sigmoid: ("{g} * {out} * ({one} - {out})",),
    ew.Relu: ("{g} * {step}({a})",),
}
_NUMBERS = {"zero": 0.0, "one": 1.0, "two": 2.0}


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


@dataclass
class BackwardKernel:
    """One generated backward: its source and which arrays it takes, in order."""

    name: str
    source: str
    reads_inputs: list[int]  # region inputs it reads (the forward must keep these)
    reads_output: bool  # whether it reads the region's (single) output
    grads_for: list[int]  # region inputs it writes a gradient for (the others get None)


def _live(region: Region, needs: tuple[bool, ...]) -> set[str]:
    """Variables a gradient flows to: inputs that need one, and values computed from them."""
    live = {region.input_var[r] for r, need in zip(region.inputs, needs) if need}
    for m in region.members:
        if any(isinstance(a, Ref) and region.operand(a) in live for a in m.args):
            live.add(region.member_var[m.name])
    return live


def _gradient_lines(region: Region, live: set[str], numbers: set[str]) -> tuple[list[str], set[str]]:
    """The reverse sweep: each live value's gradient, last operation first; and the
    values the slopes read."""
    lines = [f"g_{v} = grad_out{r}[i]" for r, v in enumerate(region.outputs) if v in live]
    has_gradient = {v for v in region.outputs if v in live}
    reads: set[str] = set()
    for m in reversed(region.members):
        out = region.member_var[m.name]
        if out not in has_gradient:
            continue
        operands = [region.operand(a) for a in m.args]
        names = dict(zip("ab", operands), out=out, g=f"g_{out}", **region.helpers)
        for p, a in enumerate(m.args):
            target = operands[p]
            if not isinstance(a, Ref) or target not in live:
                continue
            template = DERIVATIVES[m.target][p]
            used = _fields(template)
            reads |= {names[f] for f in used & {"a", "b", "out"}}
            numbers |= used & _NUMBERS.keys()
            term = region.rounded(template.format(**names, **{k: k for k in _NUMBERS}))
            if target in has_gradient:
                lines.append(f"g_{target} = " + region.rounded(f"g_{target} + ({term})"))
            else:
                lines.append(f"g_{target} = {term}")
                has_gradient.add(target)
    return lines, reads


def _value_lines(region: Region, reads: set[str], saved_output: str | None) -> tuple[list[str], list[int]]:
    """The values the slopes read: the output from memory when the forward kept it, inputs
    from memory, everything else recomputed in registers from them (in forward order)."""
    wanted = set(reads)
    recompute = []
    for m in reversed(region.members):  # what each recomputed value needs, back to the inputs
        v = region.member_var[m.name]
        if v in wanted and v != saved_output:
            recompute.append(m)
            wanted |= {region.operand(a) for a in m.args if isinstance(a, Ref)}
    inputs = [j for j, r in enumerate(region.inputs) if region.input_var[r] in wanted]
    lines = [f"x{j} = in{j}[i]" for j in inputs]
    if saved_output is not None and saved_output in wanted:
        lines.append(f"{saved_output} = saved_out0[i]")
    lines += [f"{region.member_var[m.name]} = {region.rounded(region.expression(m))}"
              for m in reversed(recompute)]
    return lines, inputs


def backward_kernel(region: Region, name: str, needs: tuple[bool, ...]) -> BackwardKernel:
    """The backward loop of ``region`` for the inputs that ``needs`` a gradient."""
    live = _live(region, needs)
    numbers: set[str] = set()
    gradient_lines, reads = _gradient_lines(region, live, numbers)
    saved_output = region.outputs[0] if len(region.outputs) == 1 else None
    value_lines, inputs = _value_lines(region, reads, saved_output)
    reads_output = saved_output is not None and saved_output in reads
    # An input that needs a gradient but reaches no output through live values (it feeds
    # only dead code) gets none: None, as eager leaves it, not zeros to multiply with.
    grads_for = [j for j, need in enumerate(needs) if need and _reaches(gradient_lines, j)]
    params = [f"in{j}" for j in inputs] + (["saved_out0"] if reads_output else []) + \
        [f"grad_out{r}" for r in range(len(region.outputs))] + [f"grad_in{j}" for j in grads_for]
    setup = ["n = grad_out0.size"] + constant_lines(region) + \
        [f"{k} = {region.literal(v)}" for k, v in _NUMBERS.items() if k in numbers]
    stores = [f"grad_in{j}[i] = g_x{j}" for j in grads_for]
    comment = [f"Generated by tg.compile: the backward of {region.comment()}, one loop.",
               "Reads " + _what_it_reads(inputs, reads_output) + " and the output gradient(s); "
               "values in between are recomputed in registers."]
    source = kernel_module(region, name, comment, params, setup,
                           value_lines + gradient_lines + stores)
    return BackwardKernel(name, source, inputs, reads_output, grads_for)


def _reaches(gradient_lines: list[str], j: int) -> bool:
    """Whether the sweep gave input ``j`` a gradient (it may feed no output that has one)."""
    return any(line.startswith(f"g_x{j} = ") for line in gradient_lines)


def _what_it_reads(inputs: list[int], reads_output: bool) -> str:
    kept = [f"input {j}" for j in inputs] + (["the forward's output"] if reads_output else [])
    return ", ".join(kept) if kept else "no saved values"


__all__ = ["DERIVATIVES", "BackwardKernel", "backward_kernel"]
