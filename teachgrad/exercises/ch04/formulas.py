"""Checkers for chapter 4's build exercises: the engine's own backward formulas, written by
the learner and plugged in as ``backward:Mul``, ``backward:Div``, ``backward:MatMul`` and
``backward:Sum`` (exercises 4.3 and 4.4)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import teachgrad as tg

from ...autograd import parts
from ...autograd.engine import sum_to_shape
from ..building import plugged_workload, property_test, written_by_the_learner
from ..core import Feedback, Mismatch, Test, check, expect_close, expect_true, to_numpy


@dataclass
class Formula:
    """One operation whose backward the learner writes."""

    op: str                 # the Function's name: the part is backward:<op>
    forward: Callable       # runs the operation on the inputs (recording a node)
    rule: str               # the derivative, for hints
    slips: Callable         # (inputs as arrays, grad as array) -> [(per-input gradients, hint)]


def _elementwise_slips(op: str) -> Callable:
    def slips(a: Any, b: Any, grad: np.ndarray) -> list:
        if op == "Mul":
            return [((grad * a, grad * b), "the gradients are swapped: ∂(a·b)/∂a is b, so "
                     "a's gradient is grad * b"),
                    ((b + 0 * grad, a + 0 * grad), "chain rule: multiply the local derivative "
                     "by the incoming grad")]
        return [((grad * b, None), "∂(a/b)/∂a is 1/b: divide grad by b"),
                ((None, grad * a / b**2), "∂(a/b)/∂b is −a/b²: mind the minus sign"),
                ((None, -grad * a / b), "∂(a/b)/∂b is −a/b²: b squared, not b"),
                ((None, -grad / b**2), "∂(a/b)/∂b is −a/b²: a is missing")]
    return slips


def _matmul_slips(a: np.ndarray, b: np.ndarray, grad: np.ndarray) -> list:
    return [((None, np.swapaxes(b, -1, -2) @ grad), "∂(A@B)/∂B is Aᵀ @ grad, not Bᵀ @ grad"),
            ((grad @ b, None), "∂(A@B)/∂A is grad @ Bᵀ: transpose B")]


def _sum_slips(a: np.ndarray, axes: Any, keepdim: bool, grad: np.ndarray) -> list:
    if axes is None or keepdim:
        return []
    wrong = np.broadcast_to(grad, a.shape) if grad.ndim and grad.shape[-1] == a.shape[-1] \
        and a.shape[-1] in a.shape[:-1] else None
    return [((wrong,), "without keepdim the summed dimensions are gone from grad: put them back "
                       "as size 1 (reshape) before expanding, or grad lines up with the wrong "
                       "dimension")]


FORMULAS = {
    "Mul": Formula("Mul", lambda a, b: a * b, "∂(a·b)/∂a = b, ∂(a·b)/∂b = a",
                   _elementwise_slips("Mul")),
    "Div": Formula("Div", lambda a, b: a / b, "∂(a/b)/∂a = 1/b, ∂(a/b)/∂b = −a/b²",
                   _elementwise_slips("Div")),
    "MatMul": Formula("MatMul", lambda a, b: a @ b, "∂(A@B)/∂A = grad @ Bᵀ, ∂(A@B)/∂B = Aᵀ @ grad",
                      _matmul_slips),
    "Sum": Formula("Sum", None, "every summed element gets the whole gradient", _sum_slips),
}


def _as_array(value: Any) -> Any:
    return np.asarray(to_numpy(value), dtype=np.float64) if isinstance(value, tg.Tensor) else value


def compare_formula(formula: Formula, backward: Callable, out: tg.Tensor, inputs: list,
                    described: str, slip_args: tuple) -> None:
    """Call the learner's ``backward`` on the node that made ``out`` and compare each
    gradient (summed to its input's shape, as the engine does) with the engine's formula."""
    node = out.grad_fn
    rng = np.random.default_rng(len(described))
    grad = tg.tensor(rng.normal(size=tuple(out.shape)), dtype=out.dtype)
    expected = parts.get(f"backward:{formula.op}").engine(node.ctx, grad)
    with written_by_the_learner(f"backward:{formula.op}", "backward"):
        got = backward(node.ctx, grad)
    got = got if isinstance(got, tuple) else (got,)
    expect_true(len(got) == len(expected), f"your backward returned {len(got)} value(s) for "
                f"{described}; {formula.op}'s forward takes {len(expected)} arguments",
                hint="return one gradient per argument of forward (None for the non-tensor ones)")
    for i, (mine, theirs) in enumerate(zip(got, expected)):
        tensor = inputs[i] if i < len(inputs) else None
        if not (isinstance(tensor, tg.Tensor) and tensor.requires_grad):
            continue  # (nobody takes this gradient: None or any value will do)
        what = f"gradient of input {i} for {described}"
        expect_true(isinstance(mine, tg.Tensor), f"your backward returned a "
                    f"{type(mine).__name__} as the {what}", hint="return tensors (or None)")
        shape = tuple(tensor.shape)
        lead = mine.ndim - len(shape)
        if lead < 0 or any(n != 1 and n != mine.shape[lead + k] for k, n in enumerate(shape)):
            raise Mismatch(f"the {what} has shape {list(mine.shape)}; the input has shape "
                           f"{list(shape)}", hint=f"a gradient has its input's shape (or one that "
                           f"broadcasts to it): {formula.rule}", show_values=False)
        mine_np = _as_array(sum_to_shape(mine, shape))
        want = _as_array(sum_to_shape(theirs, shape))
        hint = formula.rule
        for candidate, slip in _slips(formula, slip_args, _as_array(grad)):
            if i < len(candidate) and candidate[i] is not None \
                    and _close_after_sum(mine_np, candidate[i], shape):
                hint = slip
                break
        tolerance = 1e-4 if out.dtype == tg.float32 else 1e-9
        expect_close(mine_np, want, what=what, hint=hint, rtol=tolerance, atol=tolerance)


def _slips(formula: Formula, slip_args: tuple, grad: np.ndarray) -> list:
    """The usual wrong answers for these inputs (none where their shapes do not fit)."""
    try:
        with np.errstate(all="ignore"):
            return formula.slips(*slip_args, grad)
    except ValueError:
        return []


def _close_after_sum(got: np.ndarray, candidate: np.ndarray, shape: tuple) -> bool:
    candidate = _as_array(sum_to_shape(tg.tensor(np.asarray(candidate, dtype=np.float64)), shape))
    return got.shape == candidate.shape and np.allclose(got, candidate, rtol=1e-6, atol=1e-9)


# --- the inputs: hypothesis strategies ------------------------------------------------------

def _broadcast_pair(st):
    """Two broadcastable shapes (from a common one: leading dimensions dropped, some set to 1)."""
    def split(full):
        def one():
            return st.tuples(st.integers(0, len(full)), st.lists(st.booleans(), min_size=len(full),
                                                                  max_size=len(full)))
        def shape(choice):
            drop, ones = choice
            return tuple(1 if one_ else n for n, one_ in zip(full, ones))[drop:]
        return st.tuples(one().map(shape), one().map(shape))
    full = st.lists(st.integers(2, 4), min_size=0, max_size=3).map(tuple)
    return full.flatmap(split)


def elementwise_case(st):
    """(a's shape or 'number', b's shape or 'number', which need grads, dtype)."""
    return st.tuples(_broadcast_pair(st), st.sampled_from(["both", "a", "b", "b is a number",
                                                            "a is a number"]),
                     st.sampled_from(["float64", "float32"]))


def make_elementwise(case, seed: int) -> tuple[list, str]:
    (shape_a, shape_b), wants, dtype = case
    rng = np.random.default_rng(seed)
    def value(shape, grad):
        v = rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 2.0, size=shape)
        return tg.tensor(v, dtype=getattr(tg, dtype), requires_grad=grad)
    a = 1.5 if wants == "a is a number" else value(shape_a, wants in ("both", "a", "b is a number"))
    b = -0.75 if wants == "b is a number" else value(shape_b, wants in ("both", "b", "a is a number"))
    describe = lambda v: "a number" if not isinstance(v, tg.Tensor) else f"shape {list(v.shape)}"
    return [a, b], f"a: {describe(a)}, b: {describe(b)} ({dtype}, gradients for: {wants})"


def matmul_case(st):
    """(batch shape of A, of B, n, k, m, B transposed?, dtype)."""
    batch = st.sampled_from([(), (2,), (3,), (2, 3)])
    return st.tuples(batch, batch, st.integers(1, 4), st.integers(1, 4), st.integers(1, 4),
                     st.booleans(), st.sampled_from(["float64", "float32"]))


def make_matmul(case, seed: int) -> tuple[list, str]:
    batch_a, batch_b, n, k, m, transposed, dtype = case
    if batch_a and batch_b and batch_a != batch_b:
        batch_b = batch_a[-1:]  # (3,) with (2, 3) broadcasts; (2,) with (3,) would not
    rng = np.random.default_rng(seed)
    a = tg.tensor(rng.normal(size=batch_a + (n, k)), dtype=getattr(tg, dtype), requires_grad=True)
    if transposed:  # a transposed view, as W.T in a linear layer
        b = tg.tensor(rng.normal(size=batch_b + (m, k)), dtype=getattr(tg, dtype),
                      requires_grad=True).mT
    else:
        b = tg.tensor(rng.normal(size=batch_b + (k, m)), dtype=getattr(tg, dtype),
                      requires_grad=True)
    return [a, b], (f"A of shape {list(a.shape)} @ B of shape {list(b.shape)}"
                    f"{' (B a transposed view)' if transposed else ''}, {dtype}")


def sum_case(st):
    """(shape, the dims summed or None, keepdim, dtype)."""
    shape = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)
    def with_axes(s):
        return st.tuples(st.just(s), st.one_of(st.none(), st.lists(
            st.integers(0, len(s) - 1), min_size=1, max_size=len(s), unique=True).map(
                lambda dims: tuple(sorted(dims)))), st.booleans(),
            st.sampled_from(["float64", "float32"]))
    return shape.flatmap(with_axes)


def make_sum(case, seed: int) -> tuple[tg.Tensor, list, str, tuple]:
    shape, axes, keepdim, dtype = case
    x = tg.tensor(np.random.default_rng(seed).normal(size=shape), dtype=getattr(tg, dtype),
                  requires_grad=True)
    out = x.sum() if axes is None and not keepdim else x.sum(
        dim=axes if axes is not None else tuple(range(len(shape))), keepdim=keepdim)
    return out, [x], (f"x of shape {list(shape)}.sum(dim={axes}, keepdim={keepdim}), {dtype}",
                      (_as_array(x), out.grad_fn.ctx.axes, out.grad_fn.ctx.keepdim))


# --- the checkers ---------------------------------------------------------------------------

def _formula_tests(formula: Formula, backward: Callable, strategy: Callable,
                   make: Callable, shown: list) -> list[Test]:
    """The fixed cases the chapter shows, then random ones drawn by hypothesis."""
    def run(case: Any) -> None:
        if formula.op == "Sum":
            out, inputs, (described, slip_args) = _sum_parts(case)
        else:
            inputs, described = make(case, seed=len(str(case)))
            out = formula.forward(*inputs)
            slip_args = tuple(_as_array(v) for v in inputs)
        compare_formula(formula, backward, out, inputs, described, slip_args)

    def run_shown() -> None:
        for case in shown:
            run(case)

    shown_test = Test(f"{formula.op}: the chapter's cases", run_shown, hint=formula.rule)
    random_test = property_test(f"{formula.op}: random shapes, broadcasting, dtypes", strategy, run)
    random_test.hint = formula.rule
    return [shown_test, random_test]


def _sum_parts(case: Any) -> tuple:
    out, inputs, info = make_sum(case, seed=len(str(case)))
    return out, inputs, info


def _engine_grads(loss_of: Callable, values: list) -> list:
    leaves = [tg.tensor(v, requires_grad=True) for v in values]
    loss_of(*leaves).backward()
    return [leaf.grad.numpy() for leaf in leaves]


def _workload(ops: dict, loss_of: Callable, values: list, checked: Callable) -> Test:
    """Backward of the chapter's computation and gradcheck with the learner's formulas
    plugged in, against the engine's own gradients."""
    def run() -> None:
        expected = _engine_grads(loss_of, values)
        with contextlib.ExitStack() as stack:
            for op, backward in ops.items():
                stack.enter_context(plugged_workload(f"backward:{op}", backward, "backward ran"))
            for i, (got, want) in enumerate(zip(_engine_grads(loss_of, values), expected)):
                expect_close(got, want, what=f"gradient of input {i} with your formulas plugged "
                             "in", rtol=1e-9, atol=1e-12)
            inputs = tuple(tg.tensor(v, requires_grad=True) for v in values)
            expect_true(tg.autograd.gradcheck(checked, inputs, raise_exception=False),
                        "gradcheck failed with your formulas plugged in")
    names = " and ".join(f"backward:{op}" for op in ops)
    return Test(f"the chapter's computation: backward and gradcheck with {names} plugged in", run)


def check_elementwise_backward(mul_backward: Callable, div_backward: Callable) -> Feedback:
    """Exercise 4.3: Mul's and Div's backward, then the engine runs on them."""
    rng = np.random.default_rng(8)
    values = [rng.normal(size=(3, 4)), rng.uniform(0.5, 2.0, size=4), rng.normal(size=(3, 1))]
    tests = _formula_tests(FORMULAS["Mul"], mul_backward, elementwise_case, make_elementwise,
                           [(((3,), (3,)), "both", "float64"), (((2, 3), (3,)), "both", "float64")])
    tests += _formula_tests(FORMULAS["Div"], div_backward, elementwise_case, make_elementwise,
                            [(((3,), (3,)), "both", "float64"), (((2, 1), (3,)), "both", "float32")])
    sigmoid = lambda x, s, c: (1 / (1 + (-x * s).exp()) * c / s).sum()  # (the composed sigmoid)
    tests.append(_workload({"Mul": mul_backward, "Div": div_backward}, sigmoid, values, sigmoid))
    return check("4.3", tests, candidate=mul_backward if div_backward is not None else None,
                 solved="the engine ran your Mul and Div formulas: backward and gradcheck agree.")


def check_matmul_sum_backward(matmul_backward: Callable, sum_backward: Callable) -> Feedback:
    """Exercise 4.4: MatMul's and Sum's backward, then a two-layer network's gradients."""
    rng = np.random.default_rng(9)
    values = [rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4, 2))]
    tests = _formula_tests(FORMULAS["MatMul"], matmul_backward, matmul_case, make_matmul,
                           [((), (), 2, 3, 4, False, "float64"), ((2,), (), 3, 2, 2, True, "float64")])
    tests += _formula_tests(FORMULAS["Sum"], sum_backward, sum_case, None,
                            [((3, 4), None, False, "float64"), ((4, 4), (1,), False, "float64"),
                             ((2, 3), (0,), True, "float32")])
    network = lambda x, W1, W2: ((x @ W1).tanh() @ W2).sum(dim=1).sum()
    tests.append(_workload({"MatMul": matmul_backward, "Sum": sum_backward}, network, values,
                           network))
    return check("4.4", tests, candidate=matmul_backward if sum_backward is not None else None,
                 solved="a two-layer network's gradients came from your MatMul and Sum formulas.")
