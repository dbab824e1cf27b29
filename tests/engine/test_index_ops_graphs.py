"""The index-taking ops keep their index as a graph input: a compiled function follows
new index values (a data-dependent gather or mask gives eager's answer on every call),
and a traced graph that uses them saves and loads."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg

DATA_DEPENDENT = {
    "gather": lambda x: x.gather(0, (x > 0).long()),
    "index_select": lambda x: x.index_select(0, x.argsort()),
    "scatter_add": lambda x: x.scatter_add(0, (x > 0).long(), x),
    "scatter": lambda x: x.scatter(0, x.argsort(), x * 3),
    "index_add": lambda x: x.index_add(0, x.argsort(descending=True), x * 2),
    "masked_select": lambda x: x.masked_select(x > 0) * 2,
    "masked_fill": lambda x: x.masked_fill(x < 0, 0.5),
    "topk": lambda x: x.topk(2).indices,
    "cumprod": lambda x: x.cumprod(0),
}


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_a_compiled_function_follows_new_index_values(name):
    fn = DATA_DEPENDENT[name]
    compiled = tg.compile(fn)
    for values in ([1.0, -2.0, 3.0], [-1.0, 2.0, -3.0], [0.5, 0.25, -4.0]):
        x = tg.tensor(values)
        np.testing.assert_array_equal(compiled(x).numpy(), fn(x).numpy())


class UsesThemAll(tg.nn.Module):
    def forward(self, x):
        picked = x.gather(1, (x > 0).long()).sum() + x.index_select(0, tg.tensor([2, 0])).sum()
        parts = x.diagonal(1).sum() + tg.diag(x[0]).sum() + x.tril(-1).sum() + x.trace()
        sums = x.cumsum(1).sum() + x.masked_select(x > 0).sum() + x.sort(0).values[0].sum()
        return picked + parts + sums + x.scatter_add(1, tg.tensor([[0], [0], [1]]), x[:, :1]).sum()


def test_a_traced_graph_using_them_saves_and_loads(tmp_path):
    model = UsesThemAll()
    traced = tg.jit.trace(model, (tg.randn(3, 3),))
    tg.jit.save(traced, tmp_path / "model.tgjit")
    loaded = tg.jit.load(tmp_path / "model.tgjit")
    for _ in range(3):
        x = tg.randn(3, 3)
        np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-6)
