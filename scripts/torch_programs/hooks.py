"""Forward and backward hooks (the "hooks" tutorial's patterns) and Grad-CAM: the class
activation map from a layer's activations and the gradients that reach them."""
from __future__ import annotations

from typing import Any

from .common import images, set_weights


def hooks_and_grad_cam(torch: Any) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.classifier = nn.Linear(16, 5)

        def forward(self, x):
            x = self.features(x)
            x = self.pool(x)
            return self.classifier(torch.flatten(x, 1))

    model = SmallCNN()
    set_weights(torch, model, seed=14)
    model.eval()

    shapes = {}

    def shape_hook(name):
        def hook(module, inputs, output):
            shapes[name] = list(output.shape)
        return hook

    handles = [m.register_forward_hook(shape_hook(n)) for n, m in model.named_modules() if n]
    x = torch.from_numpy(images(15, 2, 3, 16))
    model(x)
    for h in handles:
        h.remove()
    shapes_after_removal = dict(shapes)
    shapes.clear()
    model(x)

    gradients, activations = {}, {}
    target_layer = model.features[3]

    def forward_hook(module, args, output):
        activations["value"] = output

    def backward_hook(module, grad_input, grad_output):
        gradients["value"] = grad_output[0]

    fh = target_layer.register_forward_hook(forward_hook)
    bh = target_layer.register_full_backward_hook(backward_hook)
    scale = model.features[0].register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    image = x[:1]
    output = model(image)
    pred = output.argmax(dim=1)
    output[:, pred.item()].backward()
    fh.remove()
    bh.remove()
    scale.remove()

    grads = gradients["value"]
    acts = activations["value"].detach()
    pooled_gradients = torch.mean(grads, dim=[0, 2, 3])
    for i in range(acts.size(1)):
        acts[:, i, :, :] *= pooled_gradients[i]
    heatmap = torch.mean(acts, dim=1).squeeze()
    heatmap = F.relu(heatmap)
    heatmap /= torch.max(heatmap)

    logits_hooked = []
    t = torch.ones(3, requires_grad=True)
    t.register_hook(lambda g: g * 10)
    (t * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    logits_hooked.append(t.grad)
    return {"shapes_seen": str(shapes_after_removal), "nothing_after_removal": not shapes,
            "heatmap": heatmap, "pred": pred.item(), "grad_shape": list(grads.shape),
            "tensor_hook_grad": logits_hooked[0]}
