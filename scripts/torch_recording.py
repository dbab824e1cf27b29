"""What the PyTorch recorders share: drawn parameters in, a drawn upstream gradient of each
output backpropagated, everything stored by case name (``<case>/param/<name>``,
``<case>/upstream<k>``, ``<case>/output<k>``). Run by the ``record_*.py`` scripts only."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def draw_parameters(module: Any, name: str, arrays: dict[str, np.ndarray],
                    draw: Callable[..., np.ndarray], torch: Any) -> None:
    """Give every parameter of ``module`` drawn values, stored under ``name/param/``."""
    with torch.no_grad():
        for pname, p in module.named_parameters():
            arrays[f"{name}/param/{pname}"] = values = draw(*p.shape)
            p.copy_(torch.tensor(values))


def backprop_drawn_upstream(outputs: tuple, name: str, arrays: dict[str, np.ndarray],
                            draw: Callable[..., np.ndarray], torch: Any) -> None:
    """Store each output and a drawn upstream gradient for it, then backward of
    ``sum(output * upstream)`` over all outputs."""
    total = 0
    for k, out in enumerate(outputs):
        arrays[f"{name}/upstream{k}"] = upstream = draw(*out.shape)
        arrays[f"{name}/output{k}"] = out.detach().numpy()
        total = total + (out * torch.tensor(upstream)).sum()
    total.backward()
