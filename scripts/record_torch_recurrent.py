"""Record PyTorch's recurrent layers, cells and ``pad_sequence`` into fixtures the tests
compare against (the tests never import torch).

    /work/torchenv/bin/python scripts/record_torch_recurrent.py

writes ``tests/fixtures/torch_recurrent.json`` (the cases: which module, which
options, which arrays) and ``tests/fixtures/torch_recurrent.npz`` (the arrays, float64:
the weights and inputs drawn here from a fixed seed, PyTorch's outputs, final states
and the gradients of the input, the initial states and every parameter, for a fixed
random upstream gradient of each output).
"""
from __future__ import annotations

import itertools
import json
import os

import numpy as np
import torch
from torch import nn
from torch_recording import backprop_drawn_upstream, draw_parameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")
rng = np.random.default_rng(2213)
arrays: dict[str, np.ndarray] = {}
cases: list[dict] = []
INPUT, HIDDEN, STEPS, BATCH = 5, 3, 4, 2
LAYERS = {"RNN": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}
CELLS = {"RNNCell": nn.RNNCell, "LSTMCell": nn.LSTMCell, "GRUCell": nn.GRUCell}


def draw(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def record(name: str, module: nn.Module, kind: str, options: dict, inputs: dict[str, np.ndarray],
           call) -> None:
    """Give ``module`` drawn weights, run ``call(module, **tensors)`` (a tuple of outputs),
    backprop a drawn upstream gradient of each output, and store it all under ``name/``."""
    module = module.double()
    draw_parameters(module, name, arrays, draw, torch)
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
    outputs = call(module, **tensors)
    backprop_drawn_upstream(outputs, name, arrays, draw, torch)
    for k, v in inputs.items():
        arrays[f"{name}/{k}"] = v
        arrays[f"{name}/grad_{k}"] = tensors[k].grad.numpy()
    for pname, p in module.named_parameters():
        arrays[f"{name}/grad_param/{pname}"] = p.grad.numpy()
    cases.append({"name": name, "kind": kind, "options": options, "inputs": list(inputs),
                  "outputs": len(outputs), "parameters": [n for n, _ in module.named_parameters()]})


def flatten(output, states) -> tuple:
    """``(output, h_n)`` or ``(output, (h_n, c_n))`` as one flat tuple."""
    return (output, *states) if isinstance(states, tuple) else (output, states)


def layer_cases() -> None:
    """Every layer x bidirectional x batch_first x num_layers, half of them with initial
    states (each option's every value both with and without); then unbatched inputs and
    bias=False."""
    modes = [("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"}),
             ("LSTM", {}), ("GRU", {})]
    for (kind, extra), bidirectional, batch_first, num_layers in itertools.product(
            modes, (False, True), (False, True), (1, 2)):
        with_states = (bidirectional + batch_first + num_layers) % 2 == 1
        options = dict(extra, num_layers=num_layers, bidirectional=bidirectional,
                       batch_first=batch_first)
        name = f"{kind}/{'-'.join(f'{k}={v}' for k, v in options.items())}/states={with_states}"
        add_layer_case(name, kind, options, batched=True, with_states=with_states)
    for kind, extra in modes:
        for with_states in (False, True):
            options = dict(extra, num_layers=2, bidirectional=True, batch_first=True)
            add_layer_case(f"{kind}/{extra}/unbatched/states={with_states}", kind, options,
                           batched=False, with_states=with_states)
        add_layer_case(f"{kind}/{extra}/bias=False", kind, dict(extra, bias=False, num_layers=2),
                       batched=True, with_states=True)


def add_layer_case(name: str, kind: str, options: dict, batched: bool, with_states: bool) -> None:
    directions = 2 if options.get("bidirectional") else 1
    state_shape = (options.get("num_layers", 1) * directions,) + ((BATCH,) if batched else ()) + (HIDDEN,)
    if not batched:
        x_shape = (STEPS, INPUT)
    else:
        x_shape = (BATCH, STEPS, INPUT) if options.get("batch_first") else (STEPS, BATCH, INPUT)
    inputs = {"input": draw(*x_shape)}
    if with_states:
        inputs["h0"] = draw(*state_shape)
        if kind == "LSTM":
            inputs["c0"] = draw(*state_shape)

    def call(module, input, h0=None, c0=None):
        hx = None if h0 is None else ((h0, c0) if c0 is not None else h0)
        return flatten(*module(input, hx))

    record(name, LAYERS[kind](INPUT, HIDDEN, **options), kind, options, inputs, call)


def cell_cases() -> None:
    for (kind, extra), batched, with_states, bias in itertools.product(
            [("RNNCell", {"nonlinearity": "tanh"}), ("RNNCell", {"nonlinearity": "relu"}),
             ("LSTMCell", {}), ("GRUCell", {})], (True, False), (False, True), (True, False)):
        options = dict(extra, bias=bias)
        name = f"{kind}/{extra}/batched={batched}/states={with_states}/bias={bias}"
        shape = (BATCH,) if batched else ()
        inputs = {"input": draw(*shape, INPUT)}
        if with_states:
            inputs["h0"] = draw(*shape, HIDDEN)
            if kind == "LSTMCell":
                inputs["c0"] = draw(*shape, HIDDEN)

        def call(module, input, h0=None, c0=None):
            hx = None if h0 is None else ((h0, c0) if c0 is not None else h0)
            out = module(input, hx)
            return out if isinstance(out, tuple) else (out,)

        record(name, CELLS[kind](INPUT, HIDDEN, **options), kind, options, inputs, call)


def pad_cases() -> None:
    """pad_sequence: its output and the gradient each sequence gets back."""
    lengths = (3, 1, 4)
    for batch_first, side, value in itertools.product((False, True), ("right", "left"), (0.0, -2.5)):
        name = f"pad_sequence/batch_first={batch_first}/{side}/{value}"
        options = {"batch_first": batch_first, "padding_side": side, "padding_value": value}
        inputs = {f"seq{k}": draw(n, 2) for k, n in enumerate(lengths)}
        tensors = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
        out = torch.nn.utils.rnn.pad_sequence(list(tensors.values()), **options)
        arrays[f"{name}/upstream0"] = upstream = draw(*out.shape)
        arrays[f"{name}/output0"] = out.detach().numpy()
        (out * torch.tensor(upstream)).sum().backward()
        for k, v in inputs.items():
            arrays[f"{name}/{k}"] = v
            arrays[f"{name}/grad_{k}"] = tensors[k].grad.numpy()
        cases.append({"name": name, "kind": "pad_sequence", "options": options,
                      "inputs": list(inputs), "outputs": 1, "parameters": []})


def main() -> None:
    layer_cases()
    cell_cases()
    pad_cases()
    os.makedirs(OUT, exist_ok=True)
    np.savez_compressed(os.path.join(OUT, "torch_recurrent.npz"), **arrays)
    with open(os.path.join(OUT, "torch_recurrent.json"), "w") as f:
        json.dump({"torch": torch.__version__, "sizes": {"input": INPUT, "hidden": HIDDEN,
                   "steps": STEPS, "batch": BATCH}, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
