"""BackpropStepper: it drives the real backward engine, records each step, and ends
with the gradients loss.backward() gives from zero, kept to itself."""
import numpy as np
import pytest

import teachgrad as tg
from teachgrad.autograd import backward_steps
from teachgrad.graph import node_id
from teachgrad.widgets import BackpropStepper


def build(x_grad=None):
    """A graph with a leaf used twice by one op (x * x), a leaf used by two ops (x),
    broadcasting (b) and a constant that needs no gradient (c)."""
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = tg.tensor([0.5, 2.0, -1.0], requires_grad=True)
    b = tg.tensor(0.25, requires_grad=True)
    c = tg.tensor([1.0, 1.0, 2.0])
    if x_grad is not None:
        x.grad = tg.tensor(x_grad)
    loss = ((x * x) * w + (x * c).tanh() + b).sum()
    return loss, {"x": x, "w": w, "b": b}


def grads(leaves):
    return {name: t.grad.numpy() for name, t in leaves.items()}


def own(stepper):
    return {name: g.numpy() for name, g in stepper.grads.items()}


def target_id(step):
    return node_id(step.leaf if step.leaf is not None else step.node)


def test_run_to_end_gives_the_grads_of_loss_backward():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    stepper.run_to_end()
    fresh_loss, fresh = build()
    fresh_loss.backward()
    assert stepper.done
    for name in leaves:
        np.testing.assert_allclose(own(stepper)[name], grads(fresh)[name], rtol=1e-6)
        assert leaves[name].grad is None  # the learner's tensors are left alone
    # and they are the analytic gradients
    x, w = fresh["x"].detach().numpy(), fresh["w"].detach().numpy()
    np.testing.assert_allclose(own(stepper)["x"],
                               2 * x * w + np.array([1, 1, 2]) * (1 - np.tanh(x * [1, 1, 2]) ** 2),
                               rtol=1e-5)
    np.testing.assert_allclose(own(stepper)["b"], 3.0)


def test_a_backward_in_a_later_cell_neither_shows_up_nor_changes():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    stepper.step()
    stepper.step()
    loss.backward(retain_graph=True)  # what a later cell does after Run All
    live = grads(leaves)
    stepper.run_to_end()
    fresh_loss, fresh = build()
    fresh_loss.backward()
    for name in leaves:
        np.testing.assert_allclose(own(stepper)[name], grads(fresh)[name], rtol=1e-6)
        np.testing.assert_array_equal(grads(leaves)[name], live[name])
    b_step = next(r for r in stepper.records if r.step.leaf is leaves["b"])
    assert "b.grad</code>, which is now <code>3" in b_step.panel


def test_steps_come_in_the_engines_order_with_its_values():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    stepper.run_to_end()
    fresh_loss, _ = build()
    expected = list(backward_steps(fresh_loss))
    assert [s.node.name() for s in stepper.steps] == [s.node.name() for s in expected]
    assert [s.index for s in stepper.steps] == list(range(len(expected)))
    for ours, theirs in zip(stepper.steps, expected):
        np.testing.assert_allclose(ours.grad_outputs[0].numpy(), theirs.grad_outputs[0].numpy())
        assert ours.accumulated == theirs.accumulated


def test_state_after_each_button_press():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    assert (stepper.current_step, stepper.highlighted, stepper.done) == (0, None, False)
    assert stepper.back_button.disabled and not stepper.step_button.disabled
    assert "Before backprop" in stepper.panel.value

    stepper.step_button.click()
    first = stepper.steps[0]
    assert stepper.current_step == 1 and len(stepper.steps) == 1
    assert first.node is loss.grad_fn  # backprop starts at the output
    assert stepper.highlighted == node_id(loss.grad_fn)
    assert f'data-highlighted="{stepper.highlighted}"' in stepper.canvas.value
    assert first.rule in stepper.panel.value
    assert stepper.slider.value == 1 and not stepper.back_button.disabled

    seen = [stepper.highlighted]
    while not stepper.done:
        stepper.step_button.click()
        assert stepper.highlighted == target_id(stepper.steps[-1])
        assert stepper.current_step == len(stepper.steps)
        seen.append(stepper.highlighted)
    assert len(set(seen)) == len(seen)  # every node runs once
    assert stepper.step_button.disabled
    assert "Backprop finished" in stepper.panel.value
    stepper.step_button.click()  # disabled in the browser; harmless here
    assert stepper.current_step == len(stepper.steps)


def test_back_shows_the_recorded_step_without_running_the_engine():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    for _ in range(3):
        stepper.step()
    panel_at_3, svg_at_3 = stepper.panel.value, stepper.to_svg()
    stepper.run_to_end()
    final = own(stepper)
    n = len(stepper.steps)
    for _ in range(n - 3):
        stepper.back_button.click()
    assert stepper.current_step == 3
    assert stepper.highlighted == target_id(stepper.steps[2])
    assert stepper.panel.value == panel_at_3 and stepper.to_svg() == svg_at_3
    # the picture at step 3 is the snapshot taken then: b has its grad, x not yet
    leaves_then = {n.label: n.grad for n in stepper.records[2].graph.nodes if n.kind == "leaf"}
    assert leaves_then == {"b": 3.0, "w": None, "x": None}
    assert ">grad 3<" in svg_at_3 and svg_at_3.count(">grad ") == 1
    assert len(stepper.steps) == n  # nothing re-ran ...
    for name, value in own(stepper).items():  # ... and the run keeps its final grads
        np.testing.assert_array_equal(value, final[name])
    stepper.step()  # forward again replays the record
    assert stepper.current_step == 4 and len(stepper.steps) == n


def test_an_input_used_twice_shows_accumulation():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    stepper = BackpropStepper(loss, names={"x": x})
    stepper.step()
    stepper.step()  # MulBackward: sends x's gradient along two edges
    mul = stepper.steps[1]
    assert mul.node.name() == "MulBackward" and mul.accumulated == (False, True)
    assert stepper.panel.value.count("→ x") == 2
    assert "<b>added</b> to the gradient already waiting" in stepper.panel.value
    stepper.step()  # x's AccumulateGrad receives the sum, 2x
    assert "x.grad" in stepper.panel.value and "[2., 4.]" in stepper.panel.value
    assert stepper.done


def test_the_run_starts_from_zero_and_reset_starts_it_again():
    loss, leaves = build(x_grad=[10.0, 10.0, 10.0])
    stepper = BackpropStepper(loss, names=leaves)
    stepper.run_to_end()
    after_first_run = own(stepper)
    fresh_loss, fresh = build()
    fresh_loss.backward()
    np.testing.assert_allclose(after_first_run["x"], grads(fresh)["x"], rtol=1e-6)  # not +10
    np.testing.assert_array_equal(leaves["x"].grad.numpy(), [10.0, 10.0, 10.0])
    assert leaves["w"].grad is None and leaves["b"].grad is None
    stepper.reset_button.click()
    assert all(g is None for g in stepper.grads.values())
    assert (stepper.current_step, stepper.steps, stepper.done) == (0, [], False)
    assert stepper.back_button.disabled and not stepper.step_button.disabled
    stepper.run_to_end()  # a second full run lands on the same grads, not twice them
    for name, value in own(stepper).items():
        np.testing.assert_array_equal(value, after_first_run[name])


def test_slider_and_play_move_through_steps():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    assert stepper.slider.max >= 5
    stepper.slider.value = 4  # runs the engine up to step 4
    assert stepper.current_step == 4 and len(stepper.steps) == 4
    stepper.play.value = 2  # Play is linked to the slider
    assert stepper.slider.value == 2 and stepper.current_step == 2
    stepper.run_to_end()
    assert stepper.slider.max == len(stepper.steps) == stepper.play.max


def test_a_bad_loss_is_refused_with_the_engines_message():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        BackpropStepper(x * 2)
    assert x.grad is None


def test_static_picture_highlights_the_current_node():
    loss, leaves = build()
    stepper = BackpropStepper(loss, names=leaves)
    stepper.step()
    bundle = stepper._repr_mimebundle_()
    assert "#d62728" in bundle["image/svg+xml"]  # the highlight colour of teachgrad.graph.to_dot
    assert "application/vnd.jupyter.widget-view+json" in bundle
