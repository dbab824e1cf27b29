"""The comparison the PyTorch-fixture tests share: outputs against the recorded ones, then
backward of ``sum(output * upstream)`` with the recorded upstream gradients, and every
input's and parameter's gradient against PyTorch's (arrays named ``<case>/output<k>``,
``<case>/upstream<k>``, ``<case>/grad_<input>``, ``<case>/grad_param/<parameter>``)."""
from __future__ import annotations

from typing import Any, Callable

import teachgrad as tg


def compare_with_recording(arrays: Any, name: str, device: str, outputs: tuple,
                           tensors: dict[str, tg.Tensor], module: Any,
                           close: Callable[[tg.Tensor, Any], None]) -> None:
    total = None
    for k, out in enumerate(outputs):
        assert out.device == tg.device("cuda:0" if device == "cuda" else device)
        close(out, arrays[f"{name}/output{k}"])
        term = (out * tg.tensor(arrays[f"{name}/upstream{k}"], device=device)).sum()
        total = term if total is None else total + term
    total.backward()
    for k, t in tensors.items():
        close(t.grad, arrays[f"{name}/grad_{k}"])
    if module is not None:
        for pname, p in module.named_parameters():
            close(p.grad, arrays[f"{name}/grad_param/{pname}"])
