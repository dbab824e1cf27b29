""""What is torch.nn really?" (from hand-written logistic regression to nn.Module,
optim, TensorDataset, DataLoader and a small CNN), "Defining new autograd Functions"
(the Legendre polynomial fit) and "Adversarial example generation" (FGSM)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import images, labels, set_weights


def what_is_nn_really(torch: Any) -> dict:
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    from_data = np.random.default_rng(7)
    x_train = torch.from_numpy(from_data.random((64, 784), dtype=np.float32))
    y_train = torch.from_numpy(from_data.integers(0, 10, 64))
    n, c = x_train.shape
    bs, lr = 16, 0.5

    weights = torch.from_numpy(from_data.standard_normal((784, 10)).astype(np.float32)) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    loss_func = nll
    by_hand = []
    for epoch in range(2):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            loss = loss_func(model(xb), yb)
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()
        by_hand.append(loss.item())
    hand_accuracy = accuracy(model(x_train), y_train)

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(784, 10)

        def forward(self, xb):
            return self.lin(xb)

    def get_model():
        model = Mnist_Logistic()
        set_weights(torch, model, seed=3)
        return model, optim.SGD(model.parameters(), lr=lr)

    train_ds = torch.utils.data.TensorDataset(x_train, y_train)
    train_dl = torch.utils.data.DataLoader(train_ds, batch_size=bs)
    model2, opt = get_model()
    for epoch in range(2):
        for xb, yb in train_dl:
            loss = F.cross_entropy(model2(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
    module_loss = loss.item()

    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    cnn = nn.Sequential(
        Lambda(lambda x: x.view(-1, 1, 28, 28)),
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    set_weights(torch, cnn, seed=4)
    opt = optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9)
    cnn_losses = []
    for xb, yb in train_dl:
        loss = F.cross_entropy(cnn(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        cnn_losses.append(loss.item())
    cnn.eval()
    with torch.no_grad():
        valid_loss = sum(F.cross_entropy(cnn(xb), yb) for xb, yb in train_dl) / len(train_dl)
    return {"by_hand": by_hand, "hand_accuracy": hand_accuracy, "module_loss": module_loss,
            "cnn_losses": cnn_losses, "valid_loss": valid_loss, "batches": len(train_dl)}


def custom_function_and_fgsm(torch: Any) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    dtype = torch.float
    x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = torch.sin(x)
    a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    for t in range(200):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    fit = f"Result: y = {a.item():.4f} + {b.item():.4f} * P3({c.item():.4f} + {d.item():.4f} x)"

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x):
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    model = LeNet()
    set_weights(torch, model, seed=5)
    model.eval()

    def fgsm_attack(image, epsilon, data_grad):
        sign_data_grad = data_grad.sign()
        perturbed_image = image + epsilon * sign_data_grad
        perturbed_image = torch.clamp(perturbed_image, 0, 1)
        return perturbed_image

    def denorm(batch, mean=[0.1307], std=[0.3081]):
        if isinstance(mean, list):
            mean = torch.tensor(mean)
        if isinstance(std, list):
            std = torch.tensor(std)
        return batch * std.view(1, -1, 1, 1) + mean.view(1, -1, 1, 1)

    finals, changed = [], []
    for k in range(3):
        data = torch.from_numpy((images(60 + k, 1, 1, 28) - 0.1307) / 0.3081)
        target = torch.from_numpy(labels(70 + k, 1, 10))
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
        data_denorm = denorm(data)
        perturbed_data = fgsm_attack(data_denorm, 0.1, data_grad)
        perturbed_data_normalized = (perturbed_data - 0.1307) / 0.3081
        output = model(perturbed_data_normalized)
        final_pred = output.max(1, keepdim=True)[1]
        finals.append(final_pred.item())
        changed.append(init_pred.item() != final_pred.item())
        adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
    return {"coefficients": [a.item(), b.item(), c.item(), d.item()], "fit_line_prefix": fit[:12],
            "final_predictions": finals, "changed": changed, "adv_shape": list(adv_ex.shape),
            "adv_min": float(adv_ex.min()), "adv_max": float(adv_ex.max())}
