"""Everyday tensor idioms, as PyTorch users write them in scripts and notebooks."""
from __future__ import annotations

from typing import Any

import numpy as np


def tensor_idioms(torch: Any) -> dict:
    F = torch.nn.functional
    rng = np.random.default_rng(16)
    x = torch.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    scores = torch.tensor([[0.1, 0.7, 0.2, 0.7], [0.5, 0.4, 0.9, 0.0]])
    labels = torch.tensor([2, 0, 1, 2, 2])
    out = {}

    values, indices = scores.topk(2, dim=1)
    out["topk"] = torch.cat([values, indices.float()], dim=1)
    out["sorted"], out["order"] = torch.sort(x[0], descending=True)
    out["argsort"] = x.argsort(dim=0)
    out["gather"] = x.gather(1, torch.tensor([[0, 4], [1, 1], [2, 0], [4, 3]]))
    out["scatter_add"] = torch.zeros(3).scatter_add_(0, labels, torch.ones(5))
    out["index_add"] = torch.zeros(3, 5).index_add_(0, torch.tensor([0, 2, 0]), x[:3])
    out["index_select"] = x.index_select(1, torch.tensor([4, 0]))
    out["masked"] = x.masked_fill(x < 0, 0.0)
    out["masked_select"] = x.masked_select(x > 1)
    out["tril"], out["triu"] = torch.tril(x), x.triu(1)
    out["diagonal"], out["trace"] = x.diagonal(), torch.trace(x[:4, :4])
    out["diag"] = torch.diag(torch.tensor([1.0, 2.0, 3.0]))
    out["cumsum"], out["cumprod"] = x.cumsum(dim=1), torch.cumprod(x[:, :3], dim=0)
    first, second = x.split([2, 3], dim=1)
    out["split"] = second
    out["chunks"] = [tuple(c.shape) for c in x.chunk(3, dim=1)]
    out["unbind"] = [r.sum().item() for r in x.unbind(0)]
    out["norms"] = torch.stack([x.norm(), x.norm(p=1), torch.linalg.vector_norm(x, ord=float("inf")),
                                torch.linalg.matrix_norm(x)])
    out["std_var"] = torch.stack([x.std(), x.var(dim=0).sum(), x.std(dim=1, unbiased=False).mean()])
    out["logsumexp"] = torch.logsumexp(x, dim=1)
    out["einsum"] = torch.einsum("ij,kj->ik", x, x)
    out["bmm_einsum"] = torch.einsum("bij,bjk->bik", x.view(2, 2, 5), x.view(2, 5, 2))
    out["cdist"] = torch.cdist(x[:2], x[2:])
    uniq, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    out["unique"] = torch.cat([uniq, inverse, counts])
    out["nonzero"] = (x > 0.5).nonzero()
    out["bincount"] = torch.bincount(labels, minlength=4)
    out["mode"] = torch.mode(labels).values
    out["one_hot"] = F.one_hot(labels, num_classes=3)
    out["checks"] = [torch.allclose(x, x + 1e-9), torch.equal(x, x.clone()),
                     bool(torch.isclose(x, x * (1 + 1e-7)).all())]
    out["formatted"] = f"{x.sum():.4f} {x.max().item():.2f}"
    out["argmax_keepdim"] = x.argmax(dim=1, keepdim=True)
    out["where"] = torch.where(x > 0, x, torch.zeros_like(x))
    out["clamp"] = x.clamp(min=-0.5, max=0.5)
    out["permute"] = x.view(2, 2, 5).permute(2, 0, 1).contiguous().view(-1)
    out["stack_unsqueeze"] = torch.stack([x[0], x[1]], dim=0).unsqueeze(1).shape
    out["expand_repeat"] = torch.tensor([1.0, 2.0]).unsqueeze(1).expand(2, 3).repeat(1, 2)
    out["range_index"] = x[range(3), [0, 2, 4]]
    out["arange_float"] = torch.arange(0, 1, 0.25)
    with torch.inference_mode():
        y = x * 2
    out["inference_mode_no_grad"] = not y.requires_grad

    torch.manual_seed(0)
    w = torch.empty(3, 4)
    w.normal_(0, 0.02)
    w.uniform_(-1, 1)
    out["uniform_in_range"] = bool(((w >= -1) & (w < 1)).all())
    perm = torch.randperm(10)
    out["randperm_is_permutation"] = sorted(perm.tolist()) == list(range(10))
    ints = torch.randint(0, 5, (100,))
    out["randint_range"] = [int(ints.min()) >= 0, int(ints.max()) <= 4, ints.dtype == torch.int64]
    drawn = torch.multinomial(torch.tensor([0.0, 1.0, 0.0]), 4, replacement=True)
    out["multinomial_certain"] = drawn
    coins = torch.bernoulli(torch.tensor([0.0, 1.0, 1.0]))
    out["bernoulli_certain"] = coins

    g = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = (g.cumsum(0) * torch.tensor([1.0, -1.0, 2.0])).sum() + g.norm() + torch.logsumexp(g, 0)
    loss.backward()
    out["grad"] = g.grad
    return out
