"""Gradients the backward engine holds alone, and split's pieces added into one array.

While ``backward()`` keeps gradients as numpy arrays (no step records, no tool watching),
its loop (``engine._run_to_end``, or ``engine._run`` when a leaf has hooks) notes which
arrays in its buffers nothing else holds: a new array from a
``fresh_gradients`` node, or a sum the engine made. A second gradient for the same input
is then added into such an array in place, and a leaf may keep it as its ``.grad``.

Of those, an array built from the pieces of ``split`` or ``chunk`` (``Index`` views that
each read one block of their input, ``Function.gradient_block``) takes each further
piece's gradient into its block: one array for the fused q/k/v gradient, where each
piece's backward alone would make a zero array the input's size, and the engine would add
them up.
"""
from __future__ import annotations

from typing import Any

from numpy import add, asarray, ndarray

from .function import Node

SENT_ALREADY = (None, None)  # what an Index node "sends" once add_piece has added it


class Pieces:
    """An owned gradient array built from pieces along one dimension: ``dim``, the
    ``(start, stop)`` of each piece added so far, and the first piece's index until
    that piece has been through ``+ 0.0`` (see :func:`add_piece`)."""

    __slots__ = ("array", "dim", "spans", "first")

    def __init__(self, array: Any, dim: int, span: tuple, first: Any) -> None:
        self.array, self.dim, self.spans, self.first = array, dim, [span], first


def first_piece(node: Node, g: Any, pieces: dict) -> None:
    """Note that the new array ``g`` (owned) is the first piece's gradient: zeros but for
    one block of positions, which ``node`` (an ``Index`` view such as a split piece) read."""
    block = node.function.gradient_block(node.ctx)
    if block is not None:
        pieces[id(g)] = Pieces(g, block[0], block[1:], node.ctx.index)


def add_piece(node: Node, g: Any, buffers: dict, owned: dict, pieces: dict) -> bool:
    """Add the gradient ``g`` of a view that reads one block of its input (``node``: a split
    piece) into the slice of the input's gradient array it belongs to, in place, when that
    array is the engine's alone and built from pieces that do not overlap this one (the
    other pieces of the split). True when done. Else the view's backward runs as usual: a
    zero array the input's size with ``g`` in its block, then added to the rest.

    The same bits as that usual way: there every element of the input's gradient is
    ``0.0 + piece`` or ``piece + 0.0``, which turns -0.0 into 0.0 and changes nothing
    else. Here a piece's block held zeros, so ``block += g`` computes ``0.0 + g``; and
    the first piece, which its backward wrote as it came, goes through ``+ 0.0`` once.
    """
    nxt, nr = node.next_functions[0]
    buf = buffers.get(nxt)
    if buf is None or nxt._pre_hooks:
        return False
    held = buf[nr]
    known = pieces.get(id(held))
    if known is None or known.array is not held or owned.get(id(held)) is not held:
        return False
    block = node.function.gradient_block(node.ctx)
    if block is None or block[0] != known.dim or any(
            start < block[2] and block[1] < stop for start, stop in known.spans):
        return False  # another dimension, or overlapping pieces: the usual way
    if type(g) is not ndarray:  # (a tensor: the node had hooks)
        g = g._array
    if g.dtype != held.dtype:
        return False
    if known.first is not None:  # the first piece's block, as the usual sum leaves it
        first = held[known.first]
        add(first, 0.0, out=first)
        known.first = None
    target = held[node.ctx.index]
    add(target, g, out=target)
    known.spans.append(block[1:])
    return True


def disown(grads: list, owned: dict, pieces: dict) -> None:
    """A node is about to run on ``grads``: none of them is the engine's alone any more."""
    for g in grads:
        if g is not None and owned.pop(id(g), None) is not None and pieces:
            pieces.pop(id(g), None)


def own_new(node: Node, g: Any, owned: dict, pieces: dict) -> None:
    """``g``, a new array from a ``fresh_gradients`` node, has just become an input's first
    gradient: the engine's alone (an array met twice: no one's), and the first piece of
    a split's gradient when ``node`` reads one block of its input."""
    owned[id(g)] = g if id(g) not in owned else None
    if node.function.gradient_block is not None:
        first_piece(node, g, pieces)


def merged(held: Any, g: Any, owned: dict, pieces: dict) -> Any:
    """The sum of an input's gradient so far, ``held``, and a further one, ``g`` (arrays):
    added into ``held`` in place when it is the engine's alone, else a new array that
    then is. (numpy gives a 0-d sum as a scalar: asarray keeps an array.)"""
    if owned.get(id(held)) is held:
        add(held, g, out=held)
        if pieces:
            pieces.pop(id(held), None)  # (no longer pieces only)
        return held
    if type(held) is not ndarray:  # (a root's own gradient, a tensor)
        held = held._array
    held = add(held, g)
    if type(held) is not ndarray:
        held = asarray(held)
    owned[id(held)] = held  # (a new array, this buffer's alone)
    return held
