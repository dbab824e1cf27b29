"""``einsum``: sums of products named by subscripts, e.g. ``einsum("bij,bjk->bik", a, b)``.

There is no einsum Function: an equation is turned into operations that already
have one, so its gradient (and every step the backprop stepper shows) comes
from them. For each operand, a repeated subscript (``"ii"``) takes the diagonal
(by indexing), and a subscript that no other operand and not the output uses is
summed away at once. Then operands are contracted two at a time as one batched
matrix product: the subscripts both share and still need are the batch, the ones
only they share are summed by the product. Last, the result is permuted into the
output's order. ``...`` stands for the same leading dimensions in every operand
(broadcasting, as in PyTorch), and a dimension of size 1 broadcasts against its
subscript's size elsewhere.
"""
from __future__ import annotations

import math
from typing import Any

from ..device import common_device
from ..tensor import Tensor
from ..creation import arange

#: Labels are letters, plus ("...", k) for the k-th dimension from the right under ``...``
Label = Any


def _fail(message: str) -> None:
    raise RuntimeError(f"einsum(): {message}")


def _term_labels(term: str, operand: Tensor, position: int) -> list[Label]:
    """The labels of one operand's dimensions, ``...`` expanded to fit its ``ndim``."""
    letters = term.replace("...", "")
    for ch in letters:
        if not ("a" <= ch <= "z" or "A" <= ch <= "Z"):
            _fail(f"invalid subscript {ch!r} for operand {position}: subscripts must be in [a-zA-Z]")
    if term.count("...") > 1 or ("." in letters):
        _fail(f"found more than one ellipsis (or a stray '.') for operand {position}")
    if "..." not in term:
        if len(term) != operand.ndim:
            _fail(f"the number of subscripts in the equation ({len(term)}) does not match the "
                  f"number of dimensions ({operand.ndim}) for operand {position} and no "
                  "ellipsis was given")
        return list(term)
    hidden = operand.ndim - len(letters)
    if hidden < 0:
        _fail(f"the number of subscripts in the equation ({len(letters)}) is more than the "
              f"number of dimensions ({operand.ndim}) for operand {position}")
    before, after = term.split("...")
    return list(before) + [("...", k) for k in range(hidden, 0, -1)] + list(after)


def _parse(equation: str, operands: tuple) -> tuple[list[list[Label]], list[Label]]:
    """Each operand's labels and the output's labels (explicit after ``->``, or implicit)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        more = "more" if len(operands) > len(terms) else "fewer"
        _fail(f"{more} operands were provided than specified in the equation ({len(operands)} "
              f"given, {len(terms)} in {equation!r})")
    labels = [_term_labels(t, op, i) for i, (t, op) in enumerate(zip(terms, operands))]
    hidden = max((sum(isinstance(x, tuple) for x in ls) for ls in labels), default=0)
    ellipsis = [("...", k) for k in range(hidden, 0, -1)]
    letters = [x for ls in labels for x in ls if isinstance(x, str)]
    if not arrow:  # implicit: the ellipsis, then each letter used once, in alphabetical order
        return labels, ellipsis + sorted(x for x in set(letters) if letters.count(x) == 1)
    for ch in rhs.replace("...", ""):
        if ch not in letters:
            _fail(f"output subscript {ch} does not appear in the equation for any input operand")
        if rhs.count(ch) > 1:
            _fail(f"output subscript {ch} appears more than once in the output")
    before, dots, after = rhs.partition("...")
    return labels, list(before) + (ellipsis if dots else []) + list(after)


def _label_sizes(operands: tuple, labels: list[list[Label]]) -> dict:
    """The size of each label; a 1 broadcasts against a larger size, other mismatches fail."""
    sizes: dict = {}
    for i, (op, ls) in enumerate(zip(operands, labels)):
        seen: dict = {}
        for label, n in zip(ls, op.shape):
            if label in seen and seen[label] != n:
                _fail(f"subscript {label} is repeated for operand {i} but the sizes don't "
                      f"match, {seen[label]} != {n}")
            seen[label] = n
            if sizes.get(label, 1) not in (1, n) and n != 1:
                _fail(f"operands do not broadcast: subscript {_show(label)} has size "
                      f"{sizes[label]} and size {n} (operand {i}, shape {list(op.shape)})")
            sizes[label] = max(sizes.get(label, 1), n)
    return sizes


def _show(label: Label) -> str:
    return "..." if isinstance(label, tuple) else label


def _diagonal(t: Tensor, labels: list[Label]) -> tuple[Tensor, list[Label]]:
    """Take the diagonal over repeated labels (``"ii"`` -> ``"i"``), by indexing."""
    unique = list(dict.fromkeys(labels))
    if len(unique) == len(labels):
        return t, labels
    index = []
    for label, n in zip(labels, t.shape):
        where = [1] * len(unique)
        where[unique.index(label)] = n
        index.append(arange(n, device=t.device).reshape(where))
    return t[tuple(index)], unique


def _sum_out(t: Tensor, labels: list[Label], keep: set) -> tuple[Tensor, list[Label]]:
    """Sum away the dimensions whose labels are not in ``keep``."""
    gone = tuple(i for i, x in enumerate(labels) if x not in keep)
    if not gone:
        return t, labels
    return t.sum(dim=gone), [x for x in labels if x in keep]


def _arrange(t: Tensor, labels: list[Label], order: list[Label], sizes: dict) -> Tensor:
    """``t`` permuted into ``order``, size-1 dimensions expanded to the label's size."""
    t = t.permute([labels.index(x) for x in order]) if order != labels else t
    full = tuple(sizes[x] for x in order)
    return t.expand(full) if tuple(t.shape) != full else t


def _contract(a: Tensor, la: list, b: Tensor, lb: list, later: set,
              sizes: dict) -> tuple[Tensor, list]:
    """``a`` and ``b`` as one batched matrix product: (batch, left, k) @ (batch, k, right)."""
    a, la = _sum_out(a, la, later | set(lb))
    b, lb = _sum_out(b, lb, later | set(la))
    batch = [x for x in la if x in lb and x in later]
    summed = [x for x in la if x in lb and x not in later]
    left = [x for x in la if x not in lb]
    right = [x for x in lb if x not in la]

    def size(group: list) -> int:
        return math.prod(sizes[x] for x in group)

    a = _arrange(a, la, batch + left + summed, sizes).reshape(size(batch), size(left), size(summed))
    b = _arrange(b, lb, batch + summed + right, sizes).reshape(size(batch), size(summed), size(right))
    out = (a @ b).reshape(tuple(sizes[x] for x in batch + left + right))
    return out, batch + left + right


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sum of products over the subscripts ``equation`` names (PyTorch's ``einsum``)."""
    if not isinstance(equation, str):
        raise TypeError("einsum(): the first argument must be the equation string, e.g. "
                        "tg.einsum('ij,jk->ik', a, b) (the sublist form is not supported)")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])  # einsum("ij,jk", [a, b]), as PyTorch accepts
    if not operands:
        _fail("must provide at least one operand")
    for i, op in enumerate(operands):
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): operand {i} must be a Tensor, not {type(op).__name__}")
        if op.dtype is not operands[0].dtype:
            raise RuntimeError(f"einsum(): expected all operands to have the same dtype, but "
                               f"operand 0 is {operands[0].dtype} and operand {i} is {op.dtype}. "
                               f"Fix: convert one, e.g. .to({operands[0].dtype})")
    common_device(list(operands), "einsum")
    labels, output = _parse(equation, operands)
    sizes = _label_sizes(operands, labels)
    pieces = [_diagonal(op, ls) for op, ls in zip(operands, labels)]
    result, have = pieces[0]
    for k, (t, lt) in enumerate(pieces[1:], start=2):
        later = set(output).union(*(set(ls) for _, ls in pieces[k:]))
        result, have = _contract(result, have, t, lt, later, sizes)
    result, have = _sum_out(result, have, set(output))
    return _arrange(result, have, output, sizes)
