"""float16 and bfloat16 tensors: storage, rounding, conversion, printing, promotion.

Promotion is checked against PyTorch's own answers (``tests/fixtures/lowprec.npz``,
recorded by ``scripts/record_lowprec.py``).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import teachgrad as tg
from lowprec_fixture import load

NAMES = ["bool", "int64", "float16", "bfloat16", "float32", "float64"]
DTYPE = {"bool": tg.bool, "int64": tg.int64, "float16": tg.float16, "bfloat16": tg.bfloat16,
         "float32": tg.float32, "float64": tg.float64}


def test_the_dtypes_are_named_as_pytorch_names_them():
    assert tg.half is tg.float16
    assert repr(tg.bfloat16) == "teachgrad.bfloat16"
    assert tg.float16.is_floating_point and tg.bfloat16.is_floating_point
    assert tg.float16.itemsize == tg.bfloat16.itemsize == 2
    assert tg.dtypes.get_dtype("half") is tg.float16
    assert tg.dtypes.get_dtype("bfloat16") is tg.bfloat16
    assert tg.dtypes.get_dtype(np.float16) is tg.float16  # (it used to land on float32)
    assert tg.dtypes.get_dtype(ml_dtypes.bfloat16) is tg.bfloat16


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_storing_rounds_to_nearest_even_as_the_16_bit_type_does(name):
    values = np.array([1 / 3, 1e-8, 70000.0, -2.7182817, 1 + 2 ** -9, 3.0e38], np.float32)
    t = tg.tensor(values, dtype=name)
    want = values.astype(np.float16 if name == "float16" else ml_dtypes.bfloat16)
    assert t.dtype is DTYPE[name]
    assert t.numpy().dtype == want.dtype
    np.testing.assert_array_equal(t.numpy().view(np.uint16), want.view(np.uint16))
    # float16 overflows to inf past 65504; bfloat16 keeps float32's range
    assert np.isinf(t.numpy()[2]) == (name == "float16")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_conversions_and_factories(name):
    dtype = DTYPE[name]
    x = tg.tensor([1.0, 2.5, -3.25])
    method = x.half() if name == "float16" else x.bfloat16()
    assert method.dtype is dtype
    assert x.to(dtype).dtype is dtype and x.type(name).dtype is dtype
    assert x.to(dtype).float().dtype is tg.float32
    for made in (tg.zeros(2, 3, dtype=dtype), tg.ones(4, dtype=dtype), tg.randn(3, dtype=dtype),
                 tg.full((2,), 1.5, dtype=dtype), tg.arange(5, dtype=dtype)):
        assert made.dtype is dtype
    assert tg.ones(2, dtype=dtype).element_size() == 2
    assert x.to(dtype).to(tg.float32).tolist() == [1.0, 2.5, -3.25]  # (all exact in 16 bits)
    assert x.to(dtype)[1].item() == 2.5 and isinstance(x.to(dtype)[1].item(), float)


def test_printing_shows_the_dtype_and_pytorchs_digits():
    assert repr(tg.tensor([1.1, 2.2], dtype=tg.float16)) == \
        "tensor([1.0996, 2.1992], dtype=teachgrad.float16)"
    assert repr(tg.tensor([1.1, 2.2, 3.3], dtype=tg.bfloat16)) == \
        "tensor([1.1016, 2.2031, 3.2969], dtype=teachgrad.bfloat16)"


def test_a_cast_is_differentiable_and_the_gradient_comes_back_in_the_source_dtype():
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = (x.bfloat16() * 3).sum()
    y.backward()
    assert x.grad.dtype is tg.float32
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("b", NAMES)
def test_promote_types_is_pytorchs(a, b):
    _, index = load()
    assert tg.promote_types(DTYPE[a], DTYPE[b]).name == index["promote_types"][f"{a}+{b}"]


@pytest.mark.parametrize("a", NAMES)
def test_result_type_with_0d_tensors_and_scalars_is_pytorchs(a):
    _, index = load()
    cases = index["result_type"]
    vec = tg.zeros(3, dtype=DTYPE[a])
    for b in NAMES:
        got = tg.result_type(vec, tg.zeros((), dtype=DTYPE[b])).name
        assert got == cases[f"vec:{a}+0d:{b}"], b
    assert tg.result_type(vec, 2.5).name == cases[f"vec:{a}+float"]
    assert tg.result_type(vec, 2).name == cases[f"vec:{a}+int"]


def test_operations_follow_the_promotion():
    h = tg.ones(3, dtype=tg.float16)
    b = tg.ones(3, dtype=tg.bfloat16)
    assert (h + b).dtype is tg.float32
    assert (h * tg.ones(3)).dtype is tg.float32
    assert (h * 2.5).dtype is tg.float16             # a Python number never widens
    assert (h + tg.tensor(1.0)).dtype is tg.float16  # nor does a 0-d tensor of the same kind
    assert (tg.ones(3, dtype=tg.int64) + tg.tensor(1.0, dtype=tg.bfloat16)).dtype is tg.bfloat16


def test_bad_dtypes_are_refused_by_name():
    with pytest.raises(TypeError, match="unknown dtype 'float8'.*tg.float16, tg.bfloat16"):
        tg.zeros(2, dtype="float8")
    with pytest.raises(TypeError, match="unknown dtype"):
        tg.promote_types(tg.float16, "quarter")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_save_and_load_keep_every_bit(name, tmp_path):
    t = tg.randn(3, 4).to(DTYPE[name])
    tg.save({"t": t, "first": t[0, 0]}, tmp_path / "x.pt")
    back = tg.load(tmp_path / "x.pt")
    assert back["t"].dtype is DTYPE[name] and back["first"].dtype is DTYPE[name]
    np.testing.assert_array_equal(back["t"].numpy().view(np.uint16), t.numpy().view(np.uint16))


def test_numpy_16_bit_arrays_keep_their_dtype_as_in_pytorch():
    assert tg.from_numpy(np.ones(2, np.float16)).dtype is tg.float16
    assert tg.tensor(np.ones(2, ml_dtypes.bfloat16)).dtype is tg.bfloat16
