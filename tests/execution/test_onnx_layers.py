"""tg.onnx.export: whole layers (Conv, pooling, Embedding), sizes that follow dynamic axes,
names that could collide, and errors that name the layer. Every file runs in onnxruntime
and is compared with eager teachgrad at the example size and at other sizes."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import teachgrad as tg
from teachgrad.onnx import UnsupportedOperatorError

nn = tg.nn
pytestmark = pytest.mark.filterwarnings("error::UserWarning")  # no fallback warning unless asked


def run(path: str, feeds: dict) -> list:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def all_dynamic(names: dict[str, int]) -> dict[str, list[int]]:
    """Every axis of every named value dynamic (rank given per name)."""
    return {name: list(range(rank)) for name, rank in names.items()}


def check_against_eager(model, path, examples, input_names):
    for inputs in examples:
        got = run(path, {n: t.numpy() for n, t in zip(input_names, inputs)})
        want = model(*inputs)
        want = want if isinstance(want, tuple) else (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_reshape_minus_one_follows_the_batch(tmp_path):
    path = str(tmp_path / "r.onnx")
    tg.onnx.export(lambda x: x.reshape(-1, 2) * 3.0, (tg.randn(4, 4),), path,
                   input_names=["x"], output_names=["y"], dynamic_axes={"x": [0], "y": [0]})
    check_against_eager(lambda x: x.reshape(-1, 2) * 3.0, path,
                        [(tg.randn(n, 4),) for n in (1, 4, 7)], ["x"])


def test_reshapes_with_every_axis_dynamic(tmp_path):
    """Sizes read back with Shape/Gather, copied with 0, inferred with -1, all at once."""
    def f(x):  # x: (B, T, C)
        b, t, c = x.shape
        merged = x.reshape(b * t, c)             # one size follows two axes: -1
        split = merged.reshape(b, t, c)          # sizes read from a dynamic input
        swapped = x.permute(1, 0, 2).reshape(t, b * c)
        return split.sum(dim=2), swapped.tanh()

    path = str(tmp_path / "r.onnx")
    names = {"x": 3, "s": 2, "w": 2}
    tg.onnx.export(f, (tg.randn(2, 3, 4),), path, input_names=["x"], output_names=["s", "w"],
                   dynamic_axes=all_dynamic(names))
    check_against_eager(f, path, [(tg.randn(b, t, c),) for b, t, c in
                                  ((2, 3, 4), (5, 1, 4), (1, 6, 2), (3, 2, 7))], ["x"])


def test_conv_pool_classifier_runs_at_every_batch(tmp_path):
    model = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, stride=2, padding=(1, 0), dilation=(1, 2), bias=False), nn.Tanh(),
        nn.AvgPool2d(2, stride=1, padding=1),
        nn.Conv2d(8, 8, 1, groups=4), nn.Flatten(), nn.Linear(8 * 3 * 2, 5))
    path = str(tmp_path / "cnn.onnx")
    proto = tg.onnx.export(model, (tg.randn(2, 3, 9, 10),), path, input_names=["images"],
                           output_names=["scores"], dynamic_axes={"images": [0], "scores": [0]})
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("Conv") == 3 and "MaxPool" in ops and "AveragePool" in ops
    assert "Im2Col" not in str(proto)
    model.eval()
    check_against_eager(model, path, [(tg.randn(n, 3, 9, 10),) for n in (1, 2, 5)], ["images"])


def test_conv_same_padding_and_spatial_axes_dynamic(tmp_path):
    model = nn.Sequential(nn.Conv2d(2, 4, (3, 4), padding="same"), nn.MaxPool2d(3, stride=2, padding=1),
                          nn.Conv2d(4, 2, 3, dilation=2, padding=2))
    path = str(tmp_path / "same.onnx")
    tg.onnx.export(model, (tg.randn(2, 2, 8, 8),), path, input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": [0, 2, 3], "y": [0, 2, 3]})
    check_against_eager(model, path, [(tg.randn(n, 2, h, w),) for n, h, w in
                                      ((2, 8, 8), (1, 5, 11), (3, 12, 6))], ["x"])


def test_unbatched_image_through_conv_and_pool(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2))
    path = str(tmp_path / "one.onnx")
    tg.onnx.export(model, (tg.randn(1, 6, 6),), path, dynamic_axes={"input": [1, 2], "output": [1, 2]})
    check_against_eager(model, path, [(tg.randn(1, h, w),) for h, w in ((6, 6), (9, 4))], ["input"])


class Tagger(nn.Module):
    """Token ids -> embeddings -> per-token scores (the ids keep both axes dynamic)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 4, padding_idx=0)
        self.out = nn.Linear(4, 3)

    def forward(self, ids):
        return self.out(self.embed(ids)).log_softmax(dim=-1)


def test_embedding_becomes_gather(tmp_path):
    model = Tagger()
    path = str(tmp_path / "tagger.onnx")
    proto = tg.onnx.export(model, (tg.tensor([[1, 2, 0], [4, 10, 3]]),), path, input_names=["ids"],
                           output_names=["logp"], dynamic_axes=all_dynamic({"ids": 2, "logp": 3}))
    assert "Gather" in [n.op_type for n in proto.graph.node]
    rng = np.random.default_rng(0)
    check_against_eager(model, path, [(tg.tensor(rng.integers(0, 11, size=s)),)
                                      for s in ((2, 3), (1, 7), (5, 1))], ["ids"])


def test_input_named_like_a_parameter_is_refused(tmp_path):
    model = nn.Sequential(nn.Linear(3, 2))
    path = tmp_path / "m.onnx"
    with pytest.raises(ValueError, match=r"input_names: '0.weight' is the name of a parameter.*Fix"):
        tg.onnx.export(model, (tg.randn(2, 3),), str(path), input_names=["0.weight"])
    with pytest.raises(ValueError, match=r"output_names: '0.bias' is the name of a parameter"):
        tg.onnx.export(model, (tg.randn(2, 3),), str(path), output_names=["0.bias"])
    with pytest.raises(ValueError, match=r"'v' is both an input name and an output name"):
        tg.onnx.export(model, (tg.randn(2, 3),), str(path), input_names=["v"], output_names=["v"])
    assert not path.exists()


def test_user_names_like_internal_values_are_kept_and_the_internals_renamed(tmp_path):
    """'mul', 'add' and 'constant0' are names the exporter would make; the user's win."""
    scale = tg.tensor([2.0, 3.0])

    def f(mul, add):
        return mul * add + scale, (mul + 1.0).exp()

    path = str(tmp_path / "n.onnx")
    proto = tg.onnx.export(f, (tg.randn(4, 2), tg.randn(4, 2)), path, input_names=["mul", "add"],
                           output_names=["constant0", "mul_const"],
                           dynamic_axes={"mul": [0], "add": [0], "constant0": [0], "mul_const": [0]})
    assert [i.name for i in proto.graph.input] == ["mul", "add"]
    x, y = tg.randn(6, 2), tg.randn(6, 2)
    got = run(path, {"mul": x.numpy(), "add": y.numpy()})
    for g, w in zip(got, f(x, y)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5)


def test_unsupported_operation_names_its_layer(tmp_path):
    class Picks(nn.Module):
        def forward(self, x):
            return x.cumsum(1)

    model = nn.Sequential(nn.Linear(3, 3), nn.Sequential(nn.ReLU(), Picks()))
    with pytest.raises(UnsupportedOperatorError,
                       match=r"the operation CumSum \(node 'cumsum', in layer '1.1' \(Picks\)\)"):
        tg.onnx.export(model, (tg.randn(2, 3),), str(tmp_path / "m.onnx"))


def test_numbers_and_constants_that_follow_a_dynamic_axis_are_refused(tmp_path):
    path = str(tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOperatorError, match=r"holds a number that depends on the size "
                                                       r"of a dynamic axis.*x.mean\(\)"):
        tg.onnx.export(lambda x: x.sum() / x.shape[0], (tg.randn(3),), path, dynamic_axes={"x": [0]})
    with pytest.raises(UnsupportedOperatorError, match=r"has a size that follows a dynamic axis"):
        tg.onnx.export(lambda x: x + tg.randn(x.shape), (tg.randn(3),), path, dynamic_axes={"x": [0]})
    # with the axis static, both are exact at the example size
    tg.onnx.export(lambda x: x.sum() / x.shape[0], (tg.randn(3),), path)
    x = tg.randn(3)
    np.testing.assert_allclose(run(path, {"x": x.numpy()})[0], (x.sum() / 3).numpy(), rtol=1e-6)


def test_export_leaves_the_model_as_it_was(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 1, 2), nn.Flatten())
    tg.onnx.export(model, (tg.randn(1, 1, 3, 3),), str(tmp_path / "m.onnx"), dynamic_axes={"input": [0]})
    assert all("forward" not in m.__dict__ for m in model.modules())
    x = tg.randn(2, 1, 3, 3, requires_grad=True)
    model(x).sum().backward()  # the layers run their own forward (with gradients) again
    assert x.grad is not None and model[0].weight.grad is not None


def test_a_model_that_cannot_run_at_other_sizes_warns(tmp_path):
    weight = tg.ones(4, 3)
    with pytest.warns(UserWarning, match=r"traced again with its dynamic axes longer.*fails there"):
        tg.onnx.export(lambda x: x @ weight, (tg.randn(2, 4),), str(tmp_path / "m.onnx"),
                       dynamic_axes={"x": [1]})


def test_expand_keeps_a_dynamic_size_and_refuses_one_made_from_size_one(tmp_path):
    def repeat_rows(x):  # (B, C) -> (B, 3, C): the batch comes from x itself
        return x.unsqueeze(1).expand(-1, 3, -1) * 2.0

    path = str(tmp_path / "e.onnx")
    tg.onnx.export(repeat_rows, (tg.randn(2, 4),), path, dynamic_axes={"x": [0, 1], "output": [0, 2]})
    check_against_eager(repeat_rows, path, [(tg.randn(n, c),) for n, c in ((2, 4), (5, 1), (1, 7))], ["x"])

    row = tg.randn(1, 4)
    with pytest.raises(UnsupportedOperatorError, match=r"the expand \(node 'expand'\) makes a size "
                                                       r"that follows a dynamic axis from a size-1"):
        tg.onnx.export(lambda x: x + row.expand(x.shape[0], 4), (tg.randn(3, 4),), path,
                       dynamic_axes={"x": [0]})


@pytest.mark.parametrize("opset", [13, 15, 17])
def test_layers_export_at_every_supported_opset(opset, tmp_path):
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, dilation=1), nn.MaxPool2d(2, dilation=1),
                          nn.AvgPool2d(2, padding=1), nn.Flatten())
    path = str(tmp_path / f"o{opset}.onnx")
    proto = tg.onnx.export(model, (tg.randn(2, 2, 8, 8),), path, opset_version=opset,
                           dynamic_axes={"input": [0], "output": [0]})
    assert proto.opset_import[0].version == opset
    check_against_eager(model, path, [(tg.randn(n, 2, 8, 8),) for n in (1, 3)], ["input"])
