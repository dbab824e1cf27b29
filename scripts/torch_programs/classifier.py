"""The CIFAR-10 classifier of "Training a classifier" and "Saving and loading a general
checkpoint" (a model with BatchNorm and Dropout), as the PyTorch tutorials write them."""
from __future__ import annotations

import os
import tempfile
from typing import Any

from .common import images, labels, set_weights


def cifar_classifier(torch: Any) -> dict:
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)  # flatten all dimensions except batch
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    net = Net()
    set_weights(torch, net, seed=1)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    trainloader = [(torch.from_numpy(images(10 + i, 4, 3, 32)), torch.from_numpy(labels(20 + i, 4, 10)))
                   for i in range(4)]
    losses, log = [], []
    for epoch in range(2):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, targets = data
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            losses.append(loss.item())
        log.append(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 4:.3f}")

    path = os.path.join(tempfile.mkdtemp(), "cifar_net.pth")
    torch.save(net.state_dict(), path)
    net = Net()
    net.load_state_dict(torch.load(path, weights_only=True))

    testloader = [(torch.from_numpy(images(40 + i, 4, 3, 32)), torch.from_numpy(labels(50 + i, 4, 10)))
                  for i in range(2)]
    correct = total = 0
    predictions = []
    with torch.no_grad():
        for images_, targets in testloader:
            outputs = net(images_)
            _, predicted = torch.max(outputs, 1)
            total += targets.size(0)
            correct += (predicted == targets).sum().item()
            predictions.append(predicted)
    return {"losses": losses, "log_lines_equal_length": [len(line) for line in log],
            "predictions": torch.cat(predictions), "accuracy": 100 * correct // total,
            "fc3.weight": net.fc3.weight, "conv1.bias": net.conv1.bias}


def general_checkpoint(torch: Any) -> dict:
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.bn1 = nn.BatchNorm2d(6)
            self.pool = nn.MaxPool2d(2, 2)
            self.dropout = nn.Dropout(0.25)
            self.fc1 = nn.Linear(6 * 6 * 6, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.bn1(self.conv1(x))))
            x = self.dropout(torch.flatten(x, 1))
            return self.fc1(x)

    torch.manual_seed(0)
    net = Net()
    set_weights(torch, net, seed=2)
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    x, y = torch.from_numpy(images(3, 8, 3, 16)), torch.from_numpy(labels(4, 8, 10))

    net.eval()  # before training: the same weights give the same outputs in any library
    with torch.no_grad():
        first_eval = net(x)
    net.train()
    for _ in range(3):  # dropout draws its own masks: what follows checks consistency
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()

    EPOCH = 5
    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.save({
        "epoch": EPOCH,
        "model_state_dict": net.state_dict(),
        "optimizer_state_dict": optimizer.state_dict(),
        "loss": loss,
    }, path)

    model = Net()
    optimizer2 = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    epoch = checkpoint["epoch"]
    loaded_loss = checkpoint["loss"]

    model.eval()
    net.eval()
    with torch.no_grad():
        same_outputs = torch.equal(model(x), net(x))
    momentum_restored = all(
        torch.equal(optimizer2.state[p2]["momentum_buffer"], optimizer.state[p1]["momentum_buffer"])
        for p1, p2 in zip(net.parameters(), model.parameters()))
    model.train()  # resume training: one more step from the restored state
    optimizer2.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer2.step()
    return {"first_eval": first_eval, "epoch": epoch, "loss_is_a_tensor": torch.is_tensor(loaded_loss),
            "loss_restored": loaded_loss.item() == loss.item(), "same_outputs": same_outputs,
            "momentum_restored": momentum_restored,
            "running_var_changed": bool((net.bn1.running_var != 1).all()),
            "num_batches_tracked": model.bn1.num_batches_tracked.item(),
            "resumed_is_finite": bool(torch.isfinite(model.fc1.weight).all())}
