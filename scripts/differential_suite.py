"""The whole differential suite: every case of the tables in ``differential_ops.py``,
``differential_nn.py``, ``differential_ops_index.py`` and ``differential_ops_math.py``
(how a case is written and run: ``differential_cases.py``).

``scripts/record_torch_fixtures.py`` records them with torch and
``tests/engine/test_differential.py`` replays them with teachgrad. This module never
imports torch.
"""
from __future__ import annotations

import differential_nn
import differential_nn_layers
import differential_ops
import differential_ops_index
import differential_ops_math
from differential_cases import Case


def all_cases() -> list[Case]:
    """Every case, from the tables of the modules imported above."""
    found = list(differential_ops.CASES) + list(differential_nn.CASES)
    found += list(differential_ops_index.CASES)  # sorting, gather/scatter, scans, splitting
    found += list(differential_ops_math.CASES)
    found += list(differential_nn_layers.CASES)
    names = [c.name for c in found]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"case names must be unique: {sorted(duplicated)}")
    return found
