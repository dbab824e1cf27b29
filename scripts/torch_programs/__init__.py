"""Ten well-known PyTorch tutorial programs, each written as its tutorial writes it.

Each program is a function ``program(torch) -> dict`` whose only link to a library is
its ``torch`` argument: ``program(torch)`` is the tutorial, ``program(teachgrad)`` is the
same program with its import line changed. ``scripts/record_torch_programs.py`` records
what PyTorch's run returns (``tests/fixtures/torch_programs.npz``) and
``tests/engine/test_torch_programs.py`` runs every program with teachgrad and compares.

What a program returns is what the tutorial shows or relies on: losses, predictions,
weights after training, shapes, and (where the tutorial is random: dropout, sampling,
shuffling) facts that hold in every correct run, e.g. "the reloaded model gives the
saved model's outputs". Start weights and data come from numpy, so both libraries do
the same arithmetic. This package never imports torch or teachgrad itself.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import classifier, data_loading, gpt, hooks, idioms, recurrent, training

PROGRAMS: dict[str, Callable[[Any], dict]] = {
    "cifar_classifier": classifier.cifar_classifier,
    "nn_really": training.what_is_nn_really,
    "general_checkpoint": classifier.general_checkpoint,
    "char_lstm": recurrent.char_lstm,
    "name_classifier_rnn": recurrent.name_classifier,
    "nanogpt_toy": gpt.nanogpt_toy,
    "custom_function_and_fgsm": training.custom_function_and_fgsm,
    "data_loading": data_loading.data_loading,
    "hooks_and_grad_cam": hooks.hooks_and_grad_cam,
    "tensor_idioms": idioms.tensor_idioms,
}


def as_arrays(results: dict) -> dict[str, np.ndarray]:
    """A program's results as numpy arrays (numbers, bools, lists and tensors alike)."""
    out = {}
    for name, value in results.items():
        if hasattr(value, "detach"):
            value = value.detach().cpu().numpy()
        out[name] = np.asarray(value)
    return out
