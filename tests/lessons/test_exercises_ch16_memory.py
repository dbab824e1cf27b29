"""Exercise 16.3's checker: the reference Recompute passes, realistic wrong ones are rejected."""
from __future__ import annotations

import contextlib
import io

import teachgrad as tg
from teachgrad.exercises import ch16


class Recompute(tg.autograd.Function):
    @staticmethod
    def forward(ctx, run, x):
        ctx.run = run
        ctx.save_for_backward(x)
        return run(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_()
        with tg.enable_grad():
            out = ctx.run(x)
        out.backward(grad)
        return None, x.grad


def _run(candidate):
    with contextlib.redirect_stdout(io.StringIO()):
        return ch16.check_recompute(candidate)


def test_the_reference_passes():
    assert _run(Recompute).passed


def test_reusing_the_saved_input_without_detaching_doubles_the_gradient():
    class NoDetach(Recompute):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            x.requires_grad_()
            with tg.enable_grad():
                out = ctx.run(x)
            out.backward(grad)
            return None, x.grad

    feedback = _run(NoDetach)
    assert feedback.status == "wrong" and "gradient of x" in feedback.message


def test_the_gradients_in_the_wrong_order_are_rejected():
    class Swapped(Recompute):
        @staticmethod
        def backward(ctx, grad):
            return tuple(reversed(Recompute.backward(ctx, grad)))

    assert not _run(Swapped).passed


def test_running_the_block_twice_in_forward_is_rejected():
    class Twice(Recompute):
        @staticmethod
        def forward(ctx, run, x):
            ctx.run = run
            ctx.save_for_backward(x)
            run(x)
            return run(x)

    feedback = _run(Twice)
    assert feedback.status == "wrong" and "run was called 3 times" in feedback.message


def test_not_a_function_class_is_refused():
    feedback = _run(lambda run, x: run(x))
    assert not feedback.passed and "subclass of tg.autograd.Function" in feedback.message


def test_calling_the_library_checkpoint_is_withheld():
    from teachgrad.utils.checkpoint import checkpoint

    class Library(tg.autograd.Function):
        @staticmethod
        def forward(ctx, run, x):
            return checkpoint(run, x, use_reentrant=False)

        @staticmethod
        def backward(ctx, grad):
            return None, grad

    feedback = _run(Library)
    assert not feedback.passed and "tg.utils.checkpoint.checkpoint" in feedback.message
