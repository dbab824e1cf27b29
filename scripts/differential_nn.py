"""Differential cases, part 2: optimizers (every option), losses and layers as functions.

Optimizer cases run a few steps on a fixed quadratic-plus-coupling loss and
return the parameters (and a moment buffer), so every option changes the
numbers that are compared.
"""
from __future__ import annotations

import numpy as np

from differential_cases import CPU_ONLY, CaseList

f32, i64 = np.float32, np.int64
rng = np.random.default_rng(4321)
W0 = rng.standard_normal((2, 3)).astype(f32)
B0 = rng.standard_normal(3).astype(f32)

CASES = CaseList()

STEPS = 5


def _train(make, state_key=None, steps=STEPS, groups=False, sparse=False):
    """Run ``steps`` optimizer steps from (W0, B0); return the parameters (and one state buffer)."""
    def run(C, w, b):
        T = C.T
        p = T.nn.Parameter(w.detach().clone())
        q = T.nn.Parameter(b.detach().clone())
        spare = T.nn.Parameter(b.detach().clone())  # never gets a gradient: must not move
        if groups:
            params = [{"params": [p]}, {"params": [q, spare], "lr": 0.05}]
        else:
            params = [p, q, spare]
        opt = make(T, params)
        target = C.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
        for step in range(steps):
            opt.zero_grad(set_to_none=step % 2 == 0)
            loss = ((p - target) ** 2).sum() + (p.sum(0) * q).sum() + (q ** 4).sum() * 0.1
            loss.backward()
            opt.step()
        out = [p.detach(), q.detach(), spare.detach()]
        if state_key is not None:
            out.append(opt.state[p][state_key])
        return tuple(out)
    return run


def sgd(**kw):
    return lambda T, params: T.optim.SGD(params, **kw)


def adam(**kw):
    return lambda T, params: T.optim.Adam(params, **kw)


def adamw(**kw):
    return lambda T, params: T.optim.AdamW(params, **kw)


def rmsprop(**kw):
    return lambda T, params: T.optim.RMSprop(params, **kw)


OPTIMIZERS = {
    "sgd_plain": _train(sgd(lr=0.1)),
    "sgd_momentum": _train(sgd(lr=0.05, momentum=0.9), "momentum_buffer"),
    "sgd_dampening": _train(sgd(lr=0.05, momentum=0.9, dampening=0.3), "momentum_buffer"),
    "sgd_nesterov": _train(sgd(lr=0.05, momentum=0.8, nesterov=True), "momentum_buffer"),
    "sgd_weight_decay": _train(sgd(lr=0.1, weight_decay=0.2)),
    "sgd_maximize": _train(sgd(lr=0.01, momentum=0.5, maximize=True)),
    "sgd_everything": _train(sgd(lr=0.05, momentum=0.7, weight_decay=0.1, nesterov=True, maximize=False)),
    "sgd_groups": _train(sgd(lr=0.1, momentum=0.5), groups=True),
    "adam_default": _train(adam(lr=0.1), "exp_avg_sq"),
    "adam_betas": _train(adam(lr=0.05, betas=(0.5, 0.9)), "exp_avg"),
    "adam_eps": _train(adam(lr=0.05, eps=0.5)),
    "adam_weight_decay": _train(adam(lr=0.05, weight_decay=0.3)),
    "adam_amsgrad": _train(adam(lr=0.05, amsgrad=True), "max_exp_avg_sq"),
    "adam_maximize": _train(adam(lr=0.01, maximize=True)),
    "adam_groups": _train(adam(lr=0.1, betas=(0.8, 0.99)), groups=True),
    "adamw_default": _train(adamw(lr=0.05)),
    "adamw_decay_amsgrad": _train(adamw(lr=0.05, weight_decay=0.5, amsgrad=True)),
    "rmsprop_default": _train(rmsprop(lr=0.01), "square_avg"),
    "rmsprop_alpha": _train(rmsprop(lr=0.01, alpha=0.5)),
    "rmsprop_momentum": _train(rmsprop(lr=0.01, momentum=0.9), "momentum_buffer"),
    "rmsprop_centered": _train(rmsprop(lr=0.01, centered=True), "grad_avg"),
    "rmsprop_everything": _train(rmsprop(lr=0.01, alpha=0.9, eps=1e-3, weight_decay=0.1,
                                         momentum=0.5, centered=True)),
    "rmsprop_maximize": _train(rmsprop(lr=0.01, maximize=True)),
}
CASES.table("optim", OPTIMIZERS, (W0, B0), devices=CPU_ONLY)
CASES.table("optim_cuda", {k: OPTIMIZERS[k] for k in
                           ("sgd_nesterov", "adam_amsgrad", "rmsprop_everything")}, (W0, B0))


def _bad_optimizer(make):
    def run(C):
        return make(C.T, [C.T.nn.Parameter(C.tensor([1.0]))])
    return run


CASES.table("optim_error", {
    "negative_lr": _bad_optimizer(sgd(lr=-0.1)),
    "nesterov_without_momentum": _bad_optimizer(sgd(lr=0.1, nesterov=True)),
    "adam_beta_one": _bad_optimizer(adam(betas=(1.0, 0.9))),
    "adam_negative_eps": _bad_optimizer(adam(eps=-1.0)),
    "rmsprop_negative_alpha": _bad_optimizer(rmsprop(alpha=-0.5)),
    "rmsprop_negative_momentum": _bad_optimizer(rmsprop(momentum=-0.5)),
    "params_as_tensor": lambda C: C.T.optim.SGD(C.T.nn.Parameter(C.tensor([1.0])), lr=0.1),
    "empty_params": lambda C: C.T.optim.SGD([], lr=0.1),
}, devices=CPU_ONLY)


@CASES.case("optim/closure", (W0, B0), devices=CPU_ONLY)
def _closure(C, w, b):
    p = C.T.nn.Parameter(w.detach().clone())
    opt = C.T.optim.SGD([p], lr=0.1, momentum=0.5)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    losses = [opt.step(closure).detach() for _ in range(3)]
    return tuple(losses) + (p.detach(),)


# -- losses ------------------------------------------------------------------------------------
LOGITS = rng.standard_normal((5, 4)).astype(f32)
LABELS = np.array([0, 3, 1, 1, 2], i64)
IGNORED = np.array([0, -100, 1, 3, -100], i64)
CLASS_WEIGHTS = np.array([1.0, 2.0, 0.5, 3.0], f32)
ALL_IGNORED = np.array([-100, -100, -100, -100, -100], i64)


def _ce(**kw):
    def run(C, x, t, w):
        extra = dict(kw)
        if extra.pop("weighted", False):
            extra["weight"] = w
        return C.F.cross_entropy(x, t, **extra)
    return run


def _nll(**kw):
    def run(C, x, t, w):
        extra = dict(kw)
        if extra.pop("weighted", False):
            extra["weight"] = w
        return C.F.nll_loss(x.log_softmax(1), t, **extra)
    return run


for red in ("mean", "sum", "none"):
    CASES.table(f"loss_{red}", {
        "cross_entropy": _ce(reduction=red),
        "cross_entropy_weight": _ce(reduction=red, weighted=True),
        "cross_entropy_smoothing": _ce(reduction=red, label_smoothing=0.2),
        "cross_entropy_weight_smoothing": _ce(reduction=red, weighted=True, label_smoothing=0.1),
        "nll": _nll(reduction=red),
        "nll_weight": _nll(reduction=red, weighted=True),
    }, (LOGITS, LABELS, CLASS_WEIGHTS), grad=(0,),
        devices=CPU_ONLY + (("cuda",) if red == "mean" else ()))
    CASES.table(f"loss_ignore_{red}", {
        "cross_entropy": _ce(reduction=red),
        "cross_entropy_weight_smoothing": _ce(reduction=red, weighted=True, label_smoothing=0.3),
        "nll_weight": _nll(reduction=red, weighted=True),
        "cross_entropy_custom_ignore": _ce(reduction=red, ignore_index=1),
    }, (LOGITS, IGNORED, CLASS_WEIGHTS), grad=(0,), devices=CPU_ONLY)
CASES.table("loss_all_ignored", {
    "cross_entropy_mean": _ce(),
    "cross_entropy_sum": _ce(reduction="sum"),
}, (LOGITS, ALL_IGNORED, CLASS_WEIGHTS), grad=(0,), devices=CPU_ONLY)
CASES.table("loss_error", {
    "target_out_of_range": lambda C, x, t, w: C.F.cross_entropy(x, t + 3),
    "bad_reduction": lambda C, x, t, w: C.F.cross_entropy(x, t, reduction="avg"),
    "weight_wrong_size": lambda C, x, t, w: C.F.cross_entropy(x, t, weight=w[:3]),
}, (LOGITS, LABELS, CLASS_WEIGHTS), devices=CPU_ONLY)

PRED, TARGET = rng.standard_normal((4, 3)).astype(f32), rng.standard_normal((4, 3)).astype(f32)
CASES.table("regression_loss", {
    "mse_mean": lambda C, a, b: C.F.mse_loss(a, b),
    "mse_sum": lambda C, a, b: C.F.mse_loss(a, b, reduction="sum"),
    "mse_none": lambda C, a, b: C.F.mse_loss(a, b, reduction="none"),
    "l1_mean": lambda C, a, b: C.F.l1_loss(a, b),
    "l1_none": lambda C, a, b: C.F.l1_loss(a, b, reduction="none"),
    "module_mse": lambda C, a, b: C.T.nn.MSELoss(reduction="sum")(a, b),
}, (PRED, TARGET), grad=(0, 1))

# -- layers as functions -----------------------------------------------------------------------
CASES.table("layer", {
    "linear": lambda C, x, w, b: C.F.linear(x, w.t(), b),
    "linear_no_bias": lambda C, x, w, b: C.F.linear(x, w.t()),
    "linear_relu_softmax": lambda C, x, w, b: C.F.linear(x, w.t(), b).relu().softmax(1),
    "linear_3d_input": lambda C, x, w, b: C.F.linear(x.reshape(2, 2, 2), w.t(), b),
    "linear_dtype_error": lambda C, x, w, b: C.F.linear(x.double(), w.t(), b),
    "linear_shape_error": lambda C, x, w, b: C.F.linear(x, w, b),
    "relu_inplace_in_graph": lambda C, x, w, b: C.F.relu(C.F.linear(x, w.t(), b), inplace=True) * 2,
    "sigmoid_tanh": lambda C, x, w, b: C.F.sigmoid(x).sum() + C.F.tanh(x).sum(),
    "log_softmax": lambda C, x, w, b: C.F.log_softmax(x * 50, dim=1),
}, (rng.standard_normal((4, 2)).astype(f32), W0, B0), grad=(0, 1, 2))


# -- autograd ----------------------------------------------------------------------------------
def _hooked(C, x):
    x.register_hook(lambda g: g * 3)
    y = x * 2
    y.register_hook(lambda g: g + 1)
    return (y * y).sum()


def _retained(C, x):
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    return y.grad


def _accumulated(C, x):
    (x * 2).sum().backward()
    (x * x).sum().backward()
    return x.grad.clone()


def _backward_twice(C, x):
    y = (x * x).sum()
    y.backward()
    y.backward()


def _custom_square(C, x):
    class Square(C.T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    return Square.apply(x) * 3


CASES.table("autograd", {
    "hooks": _hooked,
    "retain_grad": _retained,
    "accumulate": _accumulated,
    "backward_twice_error": _backward_twice,
    "custom_function": _custom_square,
    "grad": lambda C, x: C.T.autograd.grad((x ** 3).sum(), x),
    "grad_non_leaf": lambda C, x: C.T.autograd.grad(((x * 2) ** 2).sum(), x * 1),
    "grad_outputs": lambda C, x: C.T.autograd.grad(x * x, x, grad_outputs=C.T.ones_like(x) * 2),
    "no_grad": lambda C, x: C.tensor(_under_no_grad(C, x).requires_grad),
    "detach": lambda C, x: x.detach() * x,
    "expand_backward": lambda C, x: x[:1].expand(3, 3) * x,
    "max_ties_backward": lambda C, x: C.T.maximum(x, x.detach()).amax(),
    "non_scalar_with_gradient": lambda C, x: _backward_with(C, x),
}, (np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [1.5, 1.5, 0.0]], f32),), grad=(0,))


def _under_no_grad(C, x):
    with C.T.no_grad():
        return x * 2


def _backward_with(C, x):
    y = x.exp()
    y.backward(C.T.ones_like(y) * 0.5)
    return x.grad.clone()


# -- modules -----------------------------------------------------------------------------------
def _sequential_edits(C, x):
    nn = C.T.nn
    s = nn.Sequential(nn.ReLU(), nn.Tanh())
    s.append(nn.Sigmoid())
    s.insert(-1, nn.Identity())
    s.extend([nn.Tanh()])
    del s[0]
    popped = s.pop(0)
    s[0] = nn.ReLU()
    names = C.tensor([int(name) for name, _ in s.named_children()])
    return s(x), names, C.tensor(len(s)), s[1:](x), C.tensor(isinstance(popped, nn.Identity))


def _linear_module(C, x):
    m = C.T.nn.Linear(3, 2).to(C.dev)
    with C.T.no_grad():
        m.weight.copy_(C.tensor([[1., 2., 3.], [-1., 0., 1.]]))
        m.bias.fill_(0.5)
    return m(x)


def _dropout_eval(C, x):
    d = C.T.nn.Dropout(0.5)
    d.eval()
    return d(x)


CASES.table("module", {
    "sequential_edits": _sequential_edits,
    "sequential_bad_index": lambda C, x: C.T.nn.Sequential(C.T.nn.ReLU())[3],
    "linear": _linear_module,
    "flatten": lambda C, x: (C.T.nn.Flatten()(x.reshape(3, 3, 1)), C.T.nn.Flatten(0)(x)),
    "softmax_modules": lambda C, x: (C.T.nn.Softmax(dim=1)(x), C.T.nn.LogSoftmax(dim=0)(x)),
    "dropout_eval": _dropout_eval,
    "dropout_p_one": lambda C, x: C.F.dropout(x, 1.0),
    "dropout_bad_p": lambda C, x: C.T.nn.Dropout(1.5),
    "losses": lambda C, x: (C.T.nn.L1Loss(reduction="sum")(x, x * 0),
                            C.T.nn.NLLLoss()(x.log_softmax(1), C.tensor([0, 2, 1]))),
    "parameter_int_error": lambda C, x: C.T.nn.Parameter(C.tensor([1, 2])),
}, (np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [1.5, 1.5, 0.0]], f32),), grad=(0,))
