"""Record PyTorch's GPT (``scripts/torch_gpt.py``) on drawn weights into ``tests/fixtures/torch_gpt.npz``.

    PYTHONPATH= /work/torchenv/bin/python scripts/record_gpt.py

For each case (a small configuration; tied and untied head) it stores the drawn weights
(``<case>/param/<name>``), the token ids and targets, the logits, the loss, and the
gradient of every weight after ``loss.backward()`` (``<case>/grad/<name>``). The
configuration itself is in the JSON index (``__index__``). teachgrad's test builds its
GPT from that configuration, copies the weights in and compares.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from torch_gpt import build, copy_weights  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "torch_gpt.npz"
BASE = dict(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.0)
CASES = {
    "untied": dict(BASE, bias=True, tie_weights=False),
    "tied_no_bias": dict(BASE, bias=False, tie_weights=True, n_head=4),
}
BATCH, TOKENS = 3, 7  # fewer tokens than block_size: the position table is sliced


def record_case(torch, name: str, fields: dict, rng, arrays: dict) -> None:
    model = build(torch, SimpleNamespace(**fields)).double()
    weights = {}
    for pname, p in model.named_parameters():
        # around GPT's scale, with LayerNorm's weights near one so they matter
        base = 1.0 if "ln_" in pname and pname.endswith("weight") else 0.0
        weights[pname] = base + 0.3 * rng.standard_normal(tuple(p.shape))
        arrays[f"{name}/param/{pname}"] = weights[pname]
    copy_weights(torch, model, weights)
    idx = rng.integers(0, fields["vocab_size"], (BATCH, TOKENS))
    targets = rng.integers(0, fields["vocab_size"], (BATCH, TOKENS))
    arrays[f"{name}/idx"], arrays[f"{name}/targets"] = idx, targets
    logits = model(torch.tensor(idx))
    loss = model.loss(torch.tensor(idx), torch.tensor(targets))
    loss.backward()
    arrays[f"{name}/logits"] = logits.detach().numpy()
    arrays[f"{name}/loss"] = loss.detach().numpy()
    for pname, p in model.named_parameters():
        arrays[f"{name}/grad/{pname}"] = p.grad.numpy()


def record() -> None:
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(17)
    arrays: dict[str, np.ndarray] = {}
    for name, fields in CASES.items():
        record_case(torch, name, fields, rng, arrays)
    meta = {"torch": torch.__version__, "numpy": np.__version__, "cases": CASES,
            "batch": BATCH, "tokens": TOKENS}
    arrays["__index__"] = np.array(json.dumps(meta, sort_keys=True))
    np.savez_compressed(FIXTURE, **arrays)
    print(f"wrote {FIXTURE} ({len(arrays)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    record()
