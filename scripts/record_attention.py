"""Record PyTorch's attention: ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``, into fixtures the tests
compare against (the tests never import torch).

    PYTHONPATH= /work/torchenv/bin/python scripts/record_attention.py

writes ``tests/fixtures/attention.json`` (the cases: which function or module, its
options, the call's keyword arguments, which arrays) and ``tests/fixtures/attention.npz``
(float64 arrays drawn here from a fixed seed: the parameters, in ``state_dict`` shape
and names, the inputs and masks, PyTorch's outputs, and the gradients of every input
and parameter for a fixed random upstream gradient of each output).
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_recording import backprop_drawn_upstream, draw_parameters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures")
rng = np.random.default_rng(1725)
arrays: dict[str, np.ndarray] = {}
cases: list[dict] = []
E, HEADS, L, S, N = 8, 2, 4, 5, 3


def draw(*shape: int) -> np.ndarray:
    return 0.7 * rng.standard_normal(shape)


def keep_some(*shape: int) -> np.ndarray:
    """A boolean mask, True with probability 0.7, every row keeping at least one key."""
    mask = rng.random(shape) < 0.7
    mask[..., 0] = True
    return mask


def record(name: str, kind: str, options: dict, call: dict, inputs: dict, masks: dict,
           module: nn.Module | None = None, self_attention: bool = False) -> None:
    """Run one case with gradients on, backprop a drawn upstream gradient of each output
    and store everything under ``name/``."""
    if module is not None:
        module = module.double()
        draw_parameters(module, name, arrays, draw, torch)
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
    mask_tensors = {k: torch.tensor(v) for k, v in masks.items()}
    outputs = run(kind, module, tensors, mask_tensors, call, self_attention)
    backprop_drawn_upstream(outputs, name, arrays, draw, torch)
    for k, v in {**inputs, **masks}.items():
        arrays[f"{name}/{k}"] = v
    for k, t in tensors.items():
        arrays[f"{name}/grad_{k}"] = t.grad.numpy()
    parameters = []
    if module is not None:
        for pname, p in module.named_parameters():
            arrays[f"{name}/grad_param/{pname}"] = p.grad.numpy()
            parameters.append(pname)
    cases.append({"name": name, "kind": kind, "options": options, "call": call,
                  "inputs": list(inputs), "masks": list(masks), "outputs": len(outputs),
                  "parameters": parameters, "self_attention": self_attention})


def run(kind: str, module, t: dict, masks: dict, call: dict, self_attention: bool) -> tuple:
    if kind == "sdpa":
        return (F.scaled_dot_product_attention(t["query"], t["key"], t["value"], **masks, **call),)
    if kind == "mha":
        q = t["query"]
        k, v = (q, q) if self_attention else (t["key"], t["value"])
        out, weights = module(q, k, v, **masks, **call)
        return (out,) if weights is None else (out, weights)
    return (module(t["src"], **masks, **call),)


def sdpa_cases() -> None:
    q, k, v = (2, 3, L, E), (2, 3, S, E), (2, 3, S, 6)
    plain = dict(query=draw(*q), key=draw(*k), value=draw(*v))
    record("sdpa/plain", "sdpa", {}, {}, plain, {})
    record("sdpa/scale", "sdpa", {}, {"scale": 0.3}, plain, {})
    record("sdpa/bool_mask", "sdpa", {}, {}, plain, {"attn_mask": keep_some(L, S)})
    record("sdpa/bool_mask_broadcast", "sdpa", {}, {}, plain, {"attn_mask": keep_some(2, 1, L, S)})
    float_mask = draw(2, 3, L, S)
    float_mask[rng.random((2, 3, L, S)) < 0.3] = -np.inf
    float_mask[..., 0] = 0.5
    record("sdpa/float_mask", "sdpa", {}, {}, plain, {"attn_mask": float_mask})
    record("sdpa/float_mask_2d", "sdpa", {}, {}, plain, {"attn_mask": draw(L, S)})
    dead = keep_some(L, S)
    dead[2] = False  # a query that may see no key: zero output, zero gradient
    record("sdpa/row_without_keys", "sdpa", {}, {}, plain, {"attn_mask": dead})
    record("sdpa/causal_L<S", "sdpa", {}, {"is_causal": True}, plain, {})
    square = dict(query=draw(2, 3, S, E), key=draw(*k), value=draw(*v))
    record("sdpa/causal_square", "sdpa", {}, {"is_causal": True, "scale": 0.5}, square, {})
    tall = dict(query=draw(2, 6, E), key=draw(2, 3, E), value=draw(2, 3, 4))
    record("sdpa/causal_L>S_3d", "sdpa", {}, {"is_causal": True}, tall, {})
    record("sdpa/2d", "sdpa", {}, {}, dict(query=draw(L, E), key=draw(S, E), value=draw(S, 3)), {})
    record("sdpa/5d", "sdpa", {}, {}, dict(query=draw(2, 1, 2, L, E), key=draw(2, 1, 2, S, E),
                                         value=draw(2, 1, 2, S, 3)), {"attn_mask": keep_some(L, S)})
    record("sdpa/batch_broadcast", "sdpa", {}, {}, dict(query=draw(2, 3, L, E), key=draw(1, 3, S, E),
                                                      value=draw(2, 1, S, 6)), {})
    gqa = dict(query=draw(2, 4, L, E), key=draw(2, 2, S, E), value=draw(2, 2, S, 6))
    record("sdpa/gqa", "sdpa", {}, {"enable_gqa": True}, gqa, {})
    record("sdpa/gqa_causal", "sdpa", {}, {"enable_gqa": True, "is_causal": True}, gqa, {})


def mha(name: str, options: dict, call: dict, masks: dict, batched: bool = True,
        self_attention: bool = True, lengths: tuple = (L, S)) -> None:
    """One MultiheadAttention case; inputs drawn in the layout the options ask for."""
    options = {"embed_dim": E, "num_heads": HEADS, **options}
    first = options.get("batch_first", False)

    def shaped(length: int, width: int) -> np.ndarray:
        if not batched:
            return draw(length, width)
        return draw(N, length, width) if first else draw(length, N, width)

    if self_attention:
        inputs = {"query": shaped(lengths[0], E)}
    else:
        inputs = {"query": shaped(lengths[0], E), "key": shaped(lengths[1], options.get("kdim", E)),
                  "value": shaped(lengths[1], options.get("vdim", E))}
    module = nn.MultiheadAttention(**options)
    if "dropout" in options:
        module.eval()
    record(f"mha/{name}", "mha", options, call, inputs, masks, module, self_attention)


def mha_cases() -> None:
    for first in (False, True):
        for need, average in ((True, True), (True, False), (False, True)):
            call = {"need_weights": need, "average_attn_weights": average}
            mha(f"self/batch_first={first}/need_weights={need}/average={average}",
                {"batch_first": first}, call, {}, lengths=(L, L))
    mha("cross", {}, {}, {}, self_attention=False)
    mha("cross_batch_first_per_head", {"batch_first": True}, {"average_attn_weights": False}, {},
        self_attention=False)
    mha("kdim_vdim", {"kdim": 3, "vdim": 6}, {}, {}, self_attention=False)
    mha("kdim_vdim_no_weights", {"kdim": 3, "vdim": 6, "batch_first": True},
        {"need_weights": False}, {"key_padding_mask": ~keep_some(N, S)}, self_attention=False)
    mha("no_bias", {"bias": False}, {}, {}, self_attention=False)
    mha("four_heads", {"num_heads": 4}, {"average_attn_weights": False}, {}, lengths=(L, L))
    mha("one_head", {"num_heads": 1}, {}, {}, self_attention=False)
    drop_bool = ~keep_some(N, S)
    mha("key_padding_bool", {}, {}, {"key_padding_mask": drop_bool}, self_attention=False)
    mha("key_padding_bool_no_weights", {}, {"need_weights": False},
        {"key_padding_mask": drop_bool}, self_attention=False)
    padding_float = np.where(drop_bool, -np.inf, draw(N, S))
    mha("key_padding_float", {}, {}, {"key_padding_mask": padding_float}, self_attention=False)
    mha("attn_mask_bool_2d", {}, {}, {"attn_mask": ~keep_some(L, S)}, self_attention=False)
    mha("attn_mask_float_2d", {}, {"need_weights": False}, {"attn_mask": draw(L, S)},
        self_attention=False)
    mha("attn_mask_bool_3d", {"batch_first": True}, {"average_attn_weights": False},
        {"attn_mask": ~keep_some(N * HEADS, L, S)}, self_attention=False)
    mha("attn_mask_float_3d_and_padding", {}, {},
        {"attn_mask": draw(N * HEADS, L, S), "key_padding_mask": draw(N, S)}, self_attention=False)
    mha("both_bool_masks", {}, {"need_weights": False},
        {"attn_mask": ~keep_some(L, S), "key_padding_mask": ~keep_some(N, S)}, self_attention=False)
    causal = np.triu(np.full((L, L), -np.inf), 1)
    mha("is_causal_no_weights", {"batch_first": True}, {"need_weights": False, "is_causal": True},
        {"attn_mask": causal}, lengths=(L, L))
    mha("is_causal_with_weights", {}, {"is_causal": True}, {"attn_mask": causal}, lengths=(L, L))
    mha("is_causal_and_padding", {}, {"need_weights": False, "is_causal": True},
        {"attn_mask": causal, "key_padding_mask": ~keep_some(N, L)}, lengths=(L, L))
    mha("add_bias_kv", {"add_bias_kv": True}, {},
        {"attn_mask": ~keep_some(L, S), "key_padding_mask": ~keep_some(N, S)}, self_attention=False)
    mha("add_zero_attn", {"add_zero_attn": True}, {"need_weights": False},
        {"key_padding_mask": ~keep_some(N, S)}, self_attention=False)
    mha("bias_kv_and_zero_attn", {"add_bias_kv": True, "add_zero_attn": True},
        {"average_attn_weights": False}, {"attn_mask": draw(N * HEADS, L, S)}, self_attention=False)
    mha("unbatched", {}, {}, {"key_padding_mask": ~keep_some(S)}, batched=False, self_attention=False)
    mha("unbatched_3d_mask", {"batch_first": True}, {"average_attn_weights": False},
        {"attn_mask": ~keep_some(HEADS, L, S)}, batched=False, self_attention=False)
    mha("unbatched_self_no_weights", {}, {"need_weights": False}, {}, batched=False, lengths=(L, L))
    mha("eval_ignores_dropout", {"dropout": 0.5}, {}, {}, self_attention=False)


def encoder_cases() -> None:
    causal = np.triu(np.full((L, L), -np.inf), 1)
    padding = ~keep_some(N, L)
    variants = [
        ("post_norm_relu", {}, {}, {}),
        ("pre_norm_gelu", {"norm_first": True, "activation": "gelu"}, {}, {}),
        ("batch_first_padding", {"batch_first": True}, {}, {"src_key_padding_mask": padding}),
        ("causal", {}, {"is_causal": True}, {"src_mask": causal}),
        ("mask_and_padding", {"norm_first": True}, {},
         {"src_mask": ~keep_some(L, L), "src_key_padding_mask": padding}),
        ("no_bias", {"bias": False, "layer_norm_eps": 1e-3}, {}, {}),
        ("eval_dropout", {"dropout": 0.3}, {}, {}),
    ]
    for name, options, call, masks in variants:
        options = {"d_model": E, "nhead": HEADS, "dim_feedforward": 12,
                   "dropout": options.pop("dropout", 0.0), **options}
        layer = nn.TransformerEncoderLayer(**options)
        layer.train(options["dropout"] == 0.0)
        shape = (N, L, E) if options.get("batch_first") else (L, N, E)
        record(f"encoder_layer/{name}", "encoder_layer", options, call, {"src": draw(*shape)},
               masks, layer)
    layer_options = {"d_model": E, "nhead": HEADS, "dim_feedforward": 12, "dropout": 0.0,
                     "batch_first": True}
    for name, norm, call, masks in (
            ("two_layers_norm_causal_detected", True, {}, {"mask": causal}),
            ("three_layers_padding", False, {}, {"src_key_padding_mask": padding})):
        layers = 2 if norm else 3
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer_options), layers,
                                        norm=nn.LayerNorm(E) if norm else None,
                                        enable_nested_tensor=False)
        options = {"layer": layer_options, "num_layers": layers, "norm": norm}
        record(f"encoder/{name}", "encoder", options, call, {"src": draw(N, L, E)}, masks, encoder)
    unbatched = nn.TransformerEncoderLayer(E, HEADS, 12, dropout=0.0)
    record("encoder_layer/unbatched", "encoder_layer",
           {"d_model": E, "nhead": HEADS, "dim_feedforward": 12, "dropout": 0.0}, {},
           {"src": draw(L, E)}, {"src_key_padding_mask": ~keep_some(L)}, unbatched)


def main() -> None:
    torch.manual_seed(0)
    sdpa_cases()
    mha_cases()
    encoder_cases()
    meta = {"torch": torch.__version__, "sizes": {"E": E, "heads": HEADS, "L": L, "S": S, "N": N},
            "cases": cases}
    with open(os.path.join(OUT, "attention.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    np.savez_compressed(os.path.join(OUT, "attention.npz"), **arrays)
    print(f"recorded {len(cases)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
