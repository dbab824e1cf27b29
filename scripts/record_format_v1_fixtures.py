"""Writes the format-1 fixtures: a graph and a checkpoint saved by teachgrad before its
loaders had a Function registry and size limits (commit 313f926), so the tests can show
that such files still load.

    git archive 313f926 teachgrad | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python scripts/record_format_v1_fixtures.py tests/fixtures
"""
import sys
import numpy as np
import teachgrad as tg
from teachgrad import nn
assert "/tmp/old" in tg.__file__, tg.__file__
out = sys.argv[1]
tg.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))
model.eval()
x = tg.randn(2, 1, 4, 4)

def f(x):
    h = model(x)
    top = h.max(dim=1)
    return tg.where(h > 0, h, h * 0.1).softmax(dim=1), top[0], h[:, 1:].sum(0, keepdim=True)

tg.jit.save(tg.jit.trace(f, (x,)), f"{out}/graph_format_v1.tgjit")
ys = f(x)
tg.save({"model": model.state_dict(), "epoch": 3, "note": "v1", "pair": (1, float("nan"))},
        f"{out}/checkpoint_format_v1.tg")
np.savez(f"{out}/format_v1_values.npz", x=x.numpy(), y0=ys[0].detach().numpy(),
         y1=ys[1].detach().numpy(), y2=ys[2].detach().numpy())
print("ok")
