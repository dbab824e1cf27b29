"""tg.save / tg.load: round trips, the plain format on disk, and clear errors for bad files."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import io
import json
import math
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

from teachgrad import nn


def _round_trip(obj, **load_options):
    buffer = io.BytesIO()
    tg.save(obj, buffer)
    buffer.seek(0)
    return tg.load(buffer, **load_options)


def test_a_tensor_keeps_values_dtype_shape_and_requires_grad():
    for t in (tg.randn(3, 4), tg.arange(5), tg.tensor(True), tg.tensor(2.5, dtype=tg.float64),
              tg.zeros(0, 3), tg.randn(2, 3).T):  # the last one is a non-contiguous view
        back = _round_trip(t)
        assert back.dtype == t.dtype and back.shape == t.shape and back.device == t.device
        np.testing.assert_array_equal(back.numpy(), t.numpy())
    leaf = _round_trip(tg.ones(2, requires_grad=True))
    assert leaf.requires_grad and leaf.is_leaf


def test_containers_numbers_and_strings_come_back_as_they_were():
    t = tg.arange(3.0)
    obj = {"a": [t, (1, 2.5, None)], 3: "three", 1.5: True, None: OrderedDict(x=t),
           "c": Counter({4: 2}), "inf": math.inf, "nan": float("nan"), "np": np.int64(4)}
    back = _round_trip(obj)
    assert list(back) == ["a", 3, 1.5, None, "c", "inf", "nan", "np"]
    assert back["np"] == 4 and type(back["np"]) is int
    assert back["a"][1] == (1, 2.5, None) and isinstance(back["a"], list)
    assert back[3] == "three" and back[1.5] is True
    assert isinstance(back[None], OrderedDict) and isinstance(back["c"], Counter)
    assert back["c"][4] == 2 and back["inf"] == math.inf and math.isnan(back["nan"])
    assert back["a"][0] is back[None]["x"]  # one tensor saved twice is one tensor loaded


def _model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8, 3))


def test_a_model_and_optimizer_checkpoint_round_trips_through_a_file(tmp_path):
    model, path = _model(), tmp_path / "checkpoint.tg"
    optimizer = tg.optim.Adam(model.parameters(), lr=0.01)
    model(tg.randn(4, 1, 4, 4)).sum().backward()
    optimizer.step()
    tg.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 7}, path)
    checkpoint = tg.load(path)
    assert not (tmp_path / "checkpoint.tg.partial").exists()
    restored = _model()
    restored.load_state_dict(checkpoint["model"])
    for (name, a), b in zip(model.state_dict().items(), restored.state_dict().values()):
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert restored[1].num_batches_tracked.item() == 1
    restored_optimizer = tg.optim.Adam(restored.parameters(), lr=0.01)
    restored_optimizer.load_state_dict(checkpoint["optimizer"])
    assert checkpoint["epoch"] == 7
    x = tg.randn(2, 1, 4, 4)
    model.eval(), restored.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), restored(x).detach().numpy())


def test_parameters_come_back_as_parameters():
    back = _round_trip({"w": nn.Parameter(tg.ones(2)), "frozen": nn.Parameter(tg.ones(1), False)})
    assert isinstance(back["w"], nn.Parameter) and back["w"].requires_grad
    assert isinstance(back["frozen"], nn.Parameter) and not back["frozen"].requires_grad


def test_cuda_tensors_keep_their_device_or_go_where_map_location_says():
    t = tg.arange(4.0, device="cuda")
    assert _round_trip(t).device == tg.device("cuda:0")
    on_cpu = _round_trip({"t": t}, map_location="cpu")["t"]
    assert on_cpu.device == tg.device("cpu") and on_cpu.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert _round_trip(tg.ones(1), map_location="cuda").device == tg.device("cuda:0")


def test_the_file_is_a_zip_of_a_json_manifest_and_npy_arrays_without_pickles(tmp_path):
    path = tmp_path / "x.tg"
    tg.save({"w": tg.ones(2, 3)}, path)
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ["manifest.json", "tensors/0.npy"]
        manifest = json.loads(archive.read("manifest.json"))
        array = np.load(io.BytesIO(archive.read("tensors/0.npy")), allow_pickle=False)
    assert manifest["format"] == "teachgrad" and manifest["version"] == 1
    assert manifest["object"]["items"][0][1]["dtype"] == "float32"
    np.testing.assert_array_equal(array, np.ones((2, 3), np.float32))


@pytest.mark.parametrize("obj, message", [
    (object(), r"tg.save cannot store object \(at the top level\)"),
    ({"model": nn.Linear(2, 2)}, r"tg.save cannot store Linear \(at \['model'\]\).*Fix: save the "
                                 r"object's state_dict\(\) instead"),
    ([1, {"a": {1, 2}}], r"cannot store set \(at \[1\]\['a'\]\)"),
    ({(1, 2): 3}, r"dict keys must be strings, numbers, bools or None, got tuple \(1, 2\)"),
    (np.ones(2), "cannot store ndarray"),
])
def test_what_cannot_be_saved_is_refused_before_anything_is_written(obj, message, tmp_path):
    path = tmp_path / "out.tg"
    with pytest.raises(TypeError, match=message):
        tg.save(obj, path)
    assert list(tmp_path.iterdir()) == []


def _saved_bytes(obj=None) -> bytes:
    buffer = io.BytesIO()
    tg.save(obj if obj is not None else {"w": tg.arange(6.0)}, buffer)
    return buffer.getvalue()


def _rewrite(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _with_manifest(change) -> io.BytesIO:
    files = _files(_saved_bytes())
    manifest = json.loads(files["manifest.json"])
    change(manifest)
    files["manifest.json"] = json.dumps(manifest).encode()
    return _rewrite(files)


def _flip_a_byte_in_the_array() -> io.BytesIO:
    data = bytearray(_saved_bytes())
    data[data.rindex(b"\x00\x00\xa0@")] ^= 0xFF  # inside the float32 5.0
    return io.BytesIO(bytes(data))


@pytest.mark.parametrize("make_file, message", [
    (lambda: io.BytesIO(b"not a zip at all"), r"is not a readable teachgrad file \(File is not a "
                                              r"zip file\).*torch.save files are pickles"),
    (lambda: io.BytesIO(_saved_bytes()[:-40]), "is not a readable teachgrad file"),
    (_flip_a_byte_in_the_array, r"is not a readable teachgrad file \(Bad CRC-32"),
    (lambda: _rewrite({"data.pkl": b"\x80\x04"}), "is a zip archive but has no manifest.json"),
    (lambda: _rewrite({"manifest.json": b"{broken"}), "the manifest of the file object is damaged"),
    (lambda: _with_manifest(lambda m: m.update(version=2)),
     "written in teachgrad file format version 2, but this teachgrad reads version 1"),
    (lambda: _with_manifest(lambda m: m.update(format="other")), "is not a teachgrad file"),
    (lambda: _with_manifest(lambda m: m.update(tensors=2)),
     "lists tensor 1 but does not hold it: the file is damaged"),
    (lambda: _with_manifest(lambda m: m["object"]["items"][0][1].update(shape=[3, 2])),
     "does not match the array stored for it: the file is damaged"),
    (lambda: _with_manifest(lambda m: m["object"]["items"][0][1].update(dtype="float64")),
     "does not match the array stored for it"),
    (lambda: _with_manifest(lambda m: m.update(object={"__evil__": 1})),
     "holds an entry teachgrad cannot read"),
    (lambda: _with_manifest(lambda m: m["object"]["items"].append([[1], 2])),
     "a dict in the file object is malformed"),
    (lambda: _rewrite({"manifest.json": json.dumps({"format": "teachgrad", "version": 1,
                                                    "tensors": 1, "object": {"__tensor__": 0,
                                                    "dtype": "float64", "shape": [1]}}).encode(),
                       "tensors/0.npy": _object_npy()}),
     "tensor 0 in the file object is damaged .*allow_pickle=False"),
])
def test_a_damaged_or_foreign_file_raises_one_clear_error(make_file, message):
    with pytest.raises(RuntimeError, match=message):
        tg.load(make_file())


def _object_npy() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def test_load_refuses_pickles_outright_and_odd_map_locations():
    with pytest.raises(ValueError, match="weights_only=False is not supported"):
        tg.load(io.BytesIO(_saved_bytes()), weights_only=False)
    with pytest.raises(ValueError, match=r"tg.load does not support pickle_module= \(teachgrad files"):
        tg.load(io.BytesIO(_saved_bytes()), pickle_module=object())
    with pytest.raises(ValueError, match=r"tg.save does not support pickle_protocol="):
        tg.save(tg.ones(1), io.BytesIO(), pickle_protocol=4)
    with pytest.raises(TypeError, match="map_location must be a device such as 'cpu' or 'cuda'"):
        tg.load(io.BytesIO(_saved_bytes()), map_location={"cuda:0": "cpu"})


def test_a_failed_save_leaves_an_existing_file_untouched(tmp_path):
    path = tmp_path / "model.tg"
    tg.save({"w": tg.ones(2)}, path)
    with pytest.raises(TypeError):
        tg.save({"w": tg.zeros(2), "bad": object()}, path)
    assert tg.load(path)["w"].tolist() == [1.0, 1.0]
