"""``set_cpu_backend`` applies to every cpu tensor, and numba's exp and tanh keep numpy's bits."""
from __future__ import annotations

import numpy as np
import pytest

import teachgrad as tg
from teachgrad.backends import backend_by_name, get_backend, get_cpu_backend, set_cpu_backend
from teachgrad.backends.numba_cpu import NumbaCPUBackend
from teachgrad.backends.numpy_backend import NumpyBackend


@pytest.fixture
def restore_cpu_backend():
    previous = get_cpu_backend()
    yield
    set_cpu_backend(previous)


def test_switching_applies_to_tensors_that_already_exist(restore_cpu_backend):
    set_cpu_backend("numpy")
    model = tg.nn.Linear(3, 2)  # made before the switch
    x = tg.ones(4, 3)
    set_cpu_backend("numba", wait=True)
    assert type(model.weight._backend) is NumbaCPUBackend and type(x._backend) is NumbaCPUBackend
    assert type(model(x)._backend) is NumbaCPUBackend
    assert get_backend("cpu").name == "numba" and tg.zeros(2)._backend is x._backend
    set_cpu_backend("numpy")
    assert type(model.weight._backend) is NumpyBackend
    np.testing.assert_allclose(model(x).detach().numpy(), x.numpy() @ model.weight.detach().numpy().T
                               + model.bias.detach().numpy(), rtol=1e-6)


def test_switching_leaves_the_named_backends_alone(restore_cpu_backend):
    set_cpu_backend("numba", wait=True)
    assert type(backend_by_name("numpy")) is NumpyBackend
    set_cpu_backend("numpy")
    assert type(backend_by_name("numba")) is NumbaCPUBackend


def test_an_unknown_backend_is_refused_before_anything_changes(restore_cpu_backend):
    before = get_cpu_backend()
    with pytest.raises(ValueError, match="choose one of numpy, numba"):
        set_cpu_backend("torch")
    assert get_cpu_backend() == before and get_backend("cpu").name == before


EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30, 1e-8, -1e-8, 0.5, -0.5, 8.0,
         -8.0, 20.0, 88.5, 89.0, -103.0, -104.0, 700.0, 710.0, -745.0, -746.0, 1e30, -1e30]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["exp", "tanh"])
def test_numba_exp_and_tanh_agree_with_numpy_on_edge_values(op, dtype):
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore", under="ignore"):
        x = np.concatenate([np.array(EDGES, dtype), rng.standard_normal(20_000).astype(dtype) * 30])
        got = backend_by_name("numba").unary(op, x)
        want = getattr(np, op)(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_max_ulp(got, want, maxulp=2)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # tanh(-0) is -0
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_freed_host_memory_is_kept_for_reuse_where_glibc_allows():
    import ctypes
    import os
    import subprocess
    import sys

    from teachgrad.backends import host_memory
    script = ("import teachgrad as tg; tg.ones(2); "
              "from teachgrad.backends import host_memory as h; print(h._done)")
    ran = {value: subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                 env={**os.environ, "TEACHGRAD_KEEP_FREED_MEMORY": value},
                                 check=True).stdout.strip() for value in ("1", "0")}
    assert ran["0"] == "False"  # the switch leaves malloc alone
    has_mallopt = host_memory._glibc() and hasattr(ctypes.CDLL(None), "mallopt")
    assert ran["1"] == str(has_mallopt)


# What a fresh process sees: numba not imported yet, so the switch loads it in the
# background and cpu tensors compute with numpy meanwhile (this test process has
# numba loaded already, hence a child interpreter).
FRESH_PROCESS = """
import json, time
import numpy as np
import teachgrad as tg
from teachgrad.backends import get_backend, get_cpu_backend, set_cpu_backend
model = tg.nn.Linear(3, 2)
x = tg.ones(4, 3)
start = time.perf_counter()
set_cpu_backend("numba")
returned_after = time.perf_counter() - start
from teachgrad.backends import numba_loading
loaded = numba_loading.ready()  # (not yet, unless this process was descheduled a while)
early = {"choice": get_cpu_backend(), "computing": get_backend("cpu").name, "loaded": loaded}
y = model(x)  # computed while numba loads
set_cpu_backend("numba", wait=True)
late = {"computing": get_backend("cpu").name, "same_object": model.weight._backend is x._backend,
        "agree": bool(np.allclose(model(x).detach().numpy(), y.detach().numpy(), rtol=1e-6))}
set_cpu_backend("numpy")
set_cpu_backend("numba")  # loaded now: at once
again = get_backend("cpu").name
print(json.dumps({"returned_after": returned_after, "early": early, "late": late, "again": again}))
"""


def test_the_first_switch_to_numba_returns_at_once_and_switches_when_loaded():
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True,
                          check=True, timeout=300)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["returned_after"] < 0.25  # (numba's import alone takes longer: the thread does it)
    early = seen["early"]
    assert early["choice"] == "numba"
    assert early["computing"] == ("numba" if early["loaded"] else "numpy")
    assert seen["late"] == {"computing": "numba", "same_object": True, "agree": True}
    assert seen["again"] == "numba"


def test_wait_must_be_a_bool(restore_cpu_backend):
    with pytest.raises(TypeError, match="wait must be True or False"):
        set_cpu_backend("numba", wait="yes")
