"""The ``library-call`` mutants: an exercise's method replaced by the library call that does it.

Where an exercise asks the learner to build something a library already provides,
handing in the library call is not the exercise: the checker should notice (through
the engine: no backward ran, no kernel launched), not by reading the source. Each entry
maps an exercise (its checker) to ``(function, body)`` pairs: the function of the
solution cell whose body (after its docstring) is replaced by ``body``.

This is Python source kept in a Python file on purpose: code is never read from data files.
"""
from __future__ import annotations

LIBRARY_CALLS: dict[str, list[tuple[str, str]]] = {
    # scaling on the device (2.3): numpy on the host, the result copied back
    "ch02.check_min_max_scale_on_device": [
        ("min_max_scale_on_device",
         "a = x.cpu().numpy()\n"
         "return tg.tensor((a - a.min()) / (a.max() - a.min())).to('cuda')"),
    ],
    # sum-to-shape (2.4): the engine's own, or autograd's (an add's backward sums the broadcast)
    "ch02.check_sum_to_shape": [
        ("sum_to_shape", "return tg.autograd.engine.sum_to_shape(grad, shape)"),
        ("sum_to_shape",
         "leaf = tg.zeros(*shape, dtype=grad.dtype, device=grad.device, requires_grad=True)\n"
         "with tg.enable_grad():\n"
         "    (leaf + tg.zeros_like(grad)).backward(grad)\n"
         "return leaf.grad"),
    ],
    # backward's order (3.4): the engine's own
    "ch03.check_topological_order": [
        ("topological_order", "return tg.autograd.engine.visiting_order(root)"),
    ],
    # the backward formulas (4.3, 4.4): the engine's own, or autograd through the operation
    "ch04.check_elementwise_backward": [
        ("mul_backward", "return tg.autograd.parts.get('backward:Mul').engine(ctx, grad)"),
        ("div_backward", "return tg.autograd.parts.get('backward:Div').engine(ctx, grad)"),
        ("mul_backward",
         "a, b = (t.detach().requires_grad_() for t in ctx.saved_tensors)\n"
         "with tg.enable_grad():\n"
         "    return tg.autograd.grad(a * b, (a, b), grad)"),
        ("div_backward",
         "a, b = (t.detach().requires_grad_() for t in ctx.saved_tensors)\n"
         "with tg.enable_grad():\n"
         "    return tg.autograd.grad(a / b, (a, b), grad)"),
    ],
    "ch04.check_matmul_sum_backward": [
        ("matmul_backward", "return tg.autograd.parts.get('backward:MatMul').engine(ctx, grad)"),
        ("sum_backward", "return tg.autograd.parts.get('backward:Sum').engine(ctx, grad)"),
        ("matmul_backward",
         "a, b = (t.detach().requires_grad_() for t in ctx.saved_tensors)\n"
         "with tg.enable_grad():\n"
         "    return tg.autograd.grad(a @ b, (a, b), grad)"),
    ],
    # the optimizers' steps (5.4, 5.5): the engine's own
    "ch05.check_sgd_momentum_step": [
        ("sgd_momentum_step", "return tg.optim.sgd.sgd_step(param, grad, state, group)"),
    ],
    "ch05.check_adam_step": [
        ("adam_step", "return tg.optim.adam.adam_step(param, grad, state, group)"),
    ],
    # gradients by hand (3.1): autograd's answer instead
    "ch03.check_linear_mse_grads": [
        ("linear_mse_grads",
         "X_, y_ = tg.tensor(X.numpy() if hasattr(X, 'numpy') else X), tg.tensor(y.numpy() if hasattr(y, 'numpy') else y)\n"
         "w_ = tg.tensor(w.numpy() if hasattr(w, 'numpy') else w, requires_grad=True)\n"
         "b_ = tg.tensor(b.numpy() if hasattr(b, 'numpy') else b, requires_grad=True)\n"
         "((X_ @ w_ + b_ - y_) ** 2).mean().backward()\n"
         "return w_.grad, b_.grad"),
    ],
    # a careful timer (9.1): the library's harness, which knows nothing of clock= or synchronize=
    "ch09.check_median_time": [
        ("median_time",
         "return bench.measure(fn, warmup=warmup, repeats=repeats).median_s"),
    ],
    # device time from events (10.1): the host's clock around fn() and a synchronize
    "ch10.check_device_time_ms": [
        ("device_time_ms",
         "start = time.perf_counter()\n"
         "fn()\n"
         "tg.cuda.synchronize()\n"
         "return (time.perf_counter() - start) * 1e3"),
    ],
    # dead-code elimination (11.3): the compiler's own pass
    "ch11.check_dead_code_elimination": [
        ("dead_code_elimination",
         "from teachgrad.jit import passes\n"
         "return passes.eliminate_dead_code(graph)"),
    ],
    # common-subexpression elimination (11.4): the compiler's own pass
    "ch11.check_common_subexpression_elimination": [
        ("common_subexpression_elimination",
         "from teachgrad.jit import passes\n"
         "return passes.eliminate_common_subexpressions(graph)"),
    ],
    # random search by hand (13.1): the library's search over a log-uniform space
    "ch13.check_random_search": [
        ("random_search",
         "from teachgrad import tune\n"
         "trials = tune.random_search(objective, {'lr': tune.loguniform(low, high)}, n_trials,\n"
         "                            budget, seed=seed)\n"
         "best = trials.best_trial\n"
         "return (best.config['lr'], best.loss) if best is not None else (None, math.inf)"),
    ],
    # one step of successive halving (13.2): the engine's own rule, the part it plugs into
    "ch13.check_promote": [
        ("promote", "from teachgrad.tune import promotion\n"
                    "return promotion.engine_promote(losses, eta)"),
        ("promote", "return tg.exercises.parts()['tune.promote'].engine(list(losses), eta)"),
    ],
    # Hyperband's brackets (13.3): the library's schedule
    "ch13.check_hyperband_schedule": [
        ("hyperband_schedule",
         "from teachgrad import tune\n"
         "return [[(r.n, r.budget) for r in bracket]\n"
         "        for bracket in tune.hyperband_schedule(max_budget, eta)]"),
    ],
    # serving an export (15.3): the exported file written, the engine's model answering
    "ch15.check_export_and_serve": [
        ("export_and_serve",
         "tg.onnx.export(model, (example,), path, input_names=['x'], output_names=['logits'],\n"
         "               dynamic_axes={'x': {0: 'batch'}, 'logits': {0: 'batch'}})\n"
         "return lambda array: model(tg.tensor(array)).detach().numpy()"),
    ],
    # a sampler by hand (14.4): the library's DistributedSampler
    "ch14.check_shard_indices": [
        ("shard_indices",
         "from teachgrad.utils.data import DistributedSampler\n"
         "return list(DistributedSampler(range(n), num_replicas=num_replicas, rank=rank,\n"
         "                               shuffle=False, drop_last=drop_last))"),
    ],
    # the ring all-reduce by hand (14.3): the engine's own ring on the same communicator
    "ch14.check_ring_all_reduce": [
        ("ring_all_reduce",
         "from teachgrad.distributed import ring\n"
         "ring.ring_all_reduce(data, np.add, comm,\n"
         "                     lambda requests, what: [r.Wait() for r in requests])"),
    ],
    # the ring schedule by hand (14.2): the library's schedule
    "ch14.check_ring_send_chunk": [
        ("send_chunk",
         "from teachgrad.distributed import ring\n"
         "for s in ring.ring_schedule(world_size):\n"
         "    if s.phase == phase and s.step == step and s.rank == rank:\n"
         "        return s.send"),
    ],
    # attention (17.1): the engine's own scaled dot-product attention
    "ch17.check_attention": [
        ("attention",
         "return tg.nn.functional.scaled_dot_product_attention(\n"
         "    query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)"),
    ],
}
