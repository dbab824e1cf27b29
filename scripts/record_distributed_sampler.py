"""Record torch.utils.data.DistributedSampler's shards (no shuffle) as a test fixture.

Without shuffling the shards are fully determined by the rules (padding,
drop_last, striding), so teachgrad's sampler must give the very same indices.
(With shuffling the order comes from a different generator, so only the rules
are tested.) Run: python scripts/record_distributed_sampler.py
"""
import json
from pathlib import Path

import torch
from torch.utils.data.distributed import DistributedSampler

cases = []
for n in (0, 1, 5, 10, 12, 13):
    for replicas in (1, 2, 3, 4):
        for drop_last in (False, True):
            shards = [list(DistributedSampler(range(n), num_replicas=replicas, rank=r,
                                              shuffle=False, drop_last=drop_last))
                      for r in range(replicas)]
            cases.append({"n": n, "num_replicas": replicas, "drop_last": drop_last,
                          "shards": shards})
out = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "distributed_sampler_torch.json"
out.write_text(json.dumps({"torch": torch.__version__, "cases": cases}) + "\n")
print(f"wrote {len(cases)} cases to {out}")
