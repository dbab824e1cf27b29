"""The kernels the ``cuda`` device runs as replaceable parts (cuda.map, cuda.reduce,
cuda.matmul): the engine's own kernels plugged back in give exactly its results, a
learner's kernel is launched by every matching operation, and its mistakes are stopped
with the part's and the kernel's name (in the simulator, on ragged sizes)."""
import teachgrad as tg  # first: chooses GPU or simulator before numba loads

import re

import numpy as np
import pytest
from numba import cuda

from teachgrad.backends import cuda_backend
from teachgrad.exercises import PartError, parts, plug, plugged, unplug
from teachgrad.kernels import parts as kernel_parts
from teachgrad.kernels.ops import UNARY
from teachgrad.kernels.race import run_simulated
from teachgrad.kernels.strided import wrap

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _engine_kernels_back():
    yield
    unplug()


def on_cuda(a):
    return tg.tensor(np.asarray(a), device="cuda")


def test_the_kernel_parts_are_listed_with_their_contracts():
    listed = parts()
    for name in ("cuda.map", "cuda.reduce", "cuda.matmul"):
        assert name in listed and listed[name].receives and listed[name].returns


def test_unplugged_the_backend_has_nothing_plugged():
    with plugged("cuda.map", kernel_parts.engine_map):
        assert set(cuda_backend.PLUGGED) == {"map"}
    assert cuda_backend.PLUGGED == {}


#: The one-argument kernels, by the tensor function that launches them.
TENSOR_FUNCTIONS = {op: getattr(tg, op) for op in UNARY if hasattr(tg, op)}
TENSOR_FUNCTIONS["neg"] = lambda t: -t


def test_every_public_one_argument_op_is_covered():
    assert {"exp", "log", "tanh", "sigmoid", "relu", "neg", "abs", "sqrt"} <= set(TENSOR_FUNCTIONS)


@pytest.mark.parametrize("op", sorted(TENSOR_FUNCTIONS))
def test_the_engine_map_plugged_gives_exactly_the_engine_results(op):
    values = rng.normal(size=(7, 10)) * 3  # 70 elements: more than the 2 x 32 threads launched
    x = on_cuda(values).transpose(0, 1)  # a strided input: made contiguous for the part
    fn = TENSOR_FUNCTIONS[op]
    expected = fn(x).cpu().numpy()
    with plugged("cuda.map", kernel_parts.engine_map) as part:
        got = fn(x).cpu().numpy()
    assert part.calls == 1
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 70, 1100])
def test_the_engine_reduction_plugged_gives_exactly_the_engine_results(n):
    values = rng.integers(-50, 50, size=(3, n)).astype(np.float64)  # exact sums in any order
    x = on_cuda(values)
    expected_rows, expected_all = x.sum(1).cpu().numpy(), x.sum().item()
    with plugged("cuda.reduce", kernel_parts.engine_block_sum) as part:
        rows, total = x.sum(1).cpu().numpy(), x.sum().item()
    np.testing.assert_array_equal(rows, expected_rows)
    assert total == expected_all == values.sum()
    assert part.calls == passes(n) + passes(3 * n)  # (rows of n, then one row of 3n)


def passes(n: int) -> int:
    """Launches until one value is left: each leaves one value per 32."""
    return 1 if n <= 32 else 1 + passes(-(-n // 32))


def test_a_float32_sum_on_the_plugged_reduction_is_close_to_the_engine():
    x = on_cuda(rng.normal(size=(4, 77)).astype(np.float32))
    expected = x.sum(1).cpu().numpy()
    with plugged("cuda.reduce", kernel_parts.engine_block_sum):
        got = x.sum(1).cpu().numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [((5, 11), (11, 9)), ((2, 5, 3), (3, 17)),
                                    ((1, 8), (8, 8)), ((7,), (7, 3)), ((2, 3, 4), (2, 4, 5))])
def test_the_engine_matmul_plugged_gives_exactly_the_engine_results(shapes):
    a, b = (on_cuda(rng.normal(size=s)) for s in shapes)
    expected = (a @ b).cpu().numpy()
    with plugged("cuda.matmul", kernel_parts.engine_matmul) as part:
        got = (a @ b).cpu().numpy()
    np.testing.assert_array_equal(got, expected)
    batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
    assert part.calls == max(batch, 1)


def test_a_training_step_on_the_plugged_kernels_matches_the_engine():
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(5, 6), tg.nn.Tanh(), tg.nn.Linear(6, 2)).to("cuda")
    model = model.double()
    assert all(p.dtype == tg.float64 for p in model.parameters())
    x = on_cuda(rng.normal(size=(9, 5)))
    y = on_cuda(rng.normal(size=(9, 2)))

    def grads():
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return [loss.item()] + [p.grad.cpu().numpy() for p in model.parameters()]

    expected = grads()
    with plugged("cuda.map", kernel_parts.engine_map) as mapped, \
            plugged("cuda.reduce", kernel_parts.engine_block_sum) as summed, \
            plugged("cuda.matmul", kernel_parts.engine_matmul) as multiplied:
        got = grads()
    # tanh; the mean and the bias gradients; 2 products forward, 3 backward (x needs none)
    assert mapped.calls == 1 and summed.calls >= 3 and multiplied.calls == 5
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)  # bit for bit


# -- a learner's mistakes, stopped with the part's and the kernel's name ----------------------

def make_single_pass_map(fn):
    @cuda.jit
    def single_pass_map(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = fn(x[i])
    return single_pass_map


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="relies on the simulator's launch of 2 blocks of 32 threads for 70 "
                           "elements: a GPU launches 256, so the single-pass kernel writes all")
def test_elements_nobody_wrote_are_named():
    x = on_cuda(np.linspace(-1, 1, 70))
    with plugged("cuda.map", make_single_pass_map):
        with pytest.raises(PartError, match=r"cuda\.map kernel single_pass_map .* at index 64 "
                                            r"of 70 elements \(exp\) \(never written") as caught:
            tg.exp(x)
    assert caught.value.part == "cuda.map"


@cuda.jit
def unguarded_block_sum(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.y, cuda.blockIdx.x] = x[cuda.blockIdx.y, i + 40]


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="expects IndexError from an out-of-bounds read in a kernel: only the "
                           "simulator checks bounds (a GPU reads past the end, or faults)")
def test_an_exception_in_the_kernel_points_at_the_learners_line():
    with plugged("cuda.reduce", unguarded_block_sum):
        with pytest.raises(PartError, match=r"in your cuda\.reduce kernel unguarded_block_sum "
                                            r".*IndexError.*test_kernel_parts\.py, line \d+: "
                                            r"`out\[cuda\.blockIdx\.y"):
            on_cuda(np.ones((2, 10))).sum()


def make_transposed_matmul(tile):
    @cuda.jit
    def swapped(A, B, C):
        row, col = cuda.grid(2)  # x is the column: this swaps them
        if row < C.shape[0] and col < C.shape[1]:
            acc = 0.0
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc
    return swapped


@pytest.mark.skipif(not tg.cuda.is_simulated(),
                    reason="relies on the simulator's 8 x 8 matmul tile: a GPU's 16 x 16 tile "
                           "covers C (5, 9) either way round, so the swapped kernel is right there")
def test_wrong_values_are_named_with_the_engine_answer():
    a, b = on_cuda(rng.normal(size=(5, 3))), on_cuda(rng.normal(size=(3, 9)))
    with plugged("cuda.matmul", make_transposed_matmul):
        with pytest.raises(PartError, match=r"cuda\.matmul kernel swapped .* at index \(\d, \d\) "
                                            r"of C \(5, 9\).*the engine's own kernel gives"):
            a @ b


def test_a_factory_that_returns_no_kernel_is_stopped():
    with plugged("cuda.matmul", lambda tile: (lambda A, B, C: None)):
        with pytest.raises(PartError,
                           match=r"cuda\.matmul .* returned .*expected a @cuda.jit kernel"):
            on_cuda(np.ones((2, 2))) @ on_cuda(np.ones((2, 2)))


def test_a_factory_that_raises_names_the_part():
    def make_map(fn):
        raise ValueError("not yet")
    with plugged("cuda.map", make_map):
        with pytest.raises(PartError, match=r"in your cuda\.map .*make_map\(exp\) raised "
                                            r"ValueError: not yet"):
            tg.exp(on_cuda(np.ones(3)))


def test_plug_validates_before_it_changes_anything():
    with pytest.raises(TypeError, match="needs a function"):
        plug("cuda.matmul", 3)
    assert cuda_backend.PLUGGED == {}


# -- past the end of an array: the simulator raises, a GPU writes into the engine's margin ----

def make_unbounded_map(fn):
    @cuda.jit
    def unbounded_map(out, x):
        i = cuda.grid(1)  # no `if i < out.size`: the launch has more threads than elements
        out[i] = fn(x[i])
    return unbounded_map


def test_a_write_past_the_end_of_out_is_stopped_on_the_simulator_and_on_a_gpu():
    x = on_cuda(np.linspace(-1, 1, 40))  # 40 elements; a launch of 64 (simulator) or 256 threads
    with plugged("cuda.map", make_unbounded_map):
        with pytest.raises(PartError, match=r"cuda\.map kernel unbounded_map .*on exp of 40 "
                                            r"elements.*(IndexError: .*index \d+ is out of bounds"
                                            r"|wrote .* at index 4\d of out, outside its "
                                            r"elements 40\. A GPU checks no bounds)"):
            tg.exp(x)


def _a_map_part_and_kernel():
    return kernel_parts.MAP, kernel_parts.engine_map(UNARY["exp"])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8])
def test_a_guarded_array_is_its_values_inside_a_margin_of_the_guard_value(dtype):
    values = np.arange(12).reshape(3, 4).astype(dtype)
    source = wrap(cuda.to_device(values))
    guarded = kernel_parts.Guarded("A", (3, 4), (2, 5), dtype, source)
    host = guarded.buffer.copy_to_host()
    assert host.shape == (5, 9) and guarded.view.shape == (3, 4)
    np.testing.assert_array_equal(host[:3, :4], values)
    margin = np.ones((5, 9), bool)
    margin[:3, :4] = False
    assert (host[margin] == kernel_parts.guard_value(dtype)).all()  # an input's
    assert guarded.margin_written(host) is None
    empty = kernel_parts.Guarded("out", (6,), (3,), dtype)  # no source: NaN inside (floats)
    host = empty.buffer.copy_to_host()
    assert np.isnan(host[:6]).all() if np.dtype(dtype).kind == "f" else True
    assert (host[6:] == kernel_parts.guard_value(dtype, output=True)).all()  # an output's
    assert empty.margin_written(host) is None


def test_a_guarded_array_refuses_a_margin_that_does_not_fit_its_shape():
    with pytest.raises(ValueError, match=r"one margin per axis.*shape \(3, 4\), margin \(2,\)"):
        kernel_parts.Guarded("A", (3, 4), (2,), np.float64)
    with pytest.raises(ValueError, match="ints >= 0"):
        kernel_parts.Guarded("A", (3, 4), (2, -1), np.float64)
    source = wrap(cuda.to_device(np.zeros((4, 3))))
    with pytest.raises(ValueError, match=r"the source has shape \(4, 3\), not \(3, 4\)"):
        kernel_parts.Guarded("A", (3, 4), (1, 1), np.float64, source)


def test_the_guard_values_are_exact_and_far_from_any_result():
    for dtype in (np.float32, np.float64):
        assert kernel_parts.guard_value(dtype) == -2.0 ** 127
        assert kernel_parts.guard_value(dtype, output=True) == -1.5 * 2.0 ** 127
    assert kernel_parts.guard_value(np.int8) == -128
    assert kernel_parts.guard_value(np.uint16) == 65535
    assert kernel_parts.guard_value(np.int8, output=True) == -127
    assert kernel_parts.guard_value(np.uint16, output=True) == 65534


def make_apply(fn):
    @cuda.jit
    def apply_once(out, x):
        out[0] = fn(x[0])
    return apply_once


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # (-min, abs(min))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_no_one_argument_operation_turns_an_inputs_guard_into_an_outputs(dtype):
    """A thread reading past the end of x and writing past the end of out still changes
    out's margin, whatever the operation (identity and neg included)."""
    ops = sorted(UNARY) if np.dtype(dtype).kind == "f" else ["abs", "identity", "neg", "relu",
                                                              "sign", "step"]
    guard = np.array([kernel_parts.guard_value(dtype)], dtype=dtype)
    for op in ops:
        out = np.zeros(1, dtype=dtype)
        run_simulated(make_apply(UNARY[op]), 1, 1, out, guard)  # (on any machine)
        assert out[0] != kernel_parts.guard_value(dtype, output=True), op


@pytest.mark.parametrize("written, where", [((2, 4), "(2, 4)"), ((3, 0), "(3, 0)"),
                                            ((4, 8), "(4, 8)")])
def test_a_value_written_into_the_margin_is_named_with_its_index(written, where):
    guarded = kernel_parts.Guarded("C", (3, 4), (2, 5), np.float64)
    host = guarded.buffer.copy_to_host()
    host[written] = 0.5
    part, kernel = _a_map_part_and_kernel()
    guarded.buffer.copy_to_device(host)
    with pytest.raises(PartError, match=rf"kernel grid_stride_map .*launched as \[2, 32\] on "
                                        rf"the test, wrote 0\.5 at index {re.escape(where)} of C, "
                                        rf"outside its shape \(3, 4\)\. A GPU checks no bounds"):
        kernel_parts._check_margins(part, kernel, [guarded], 2, 32, "the test")


def test_a_nan_written_into_the_margin_counts_and_an_untouched_margin_passes():
    first, second = (kernel_parts.Guarded(name, (7,), (9,), np.float32) for name in "xy")
    part, kernel = _a_map_part_and_kernel()
    read = kernel_parts._check_margins(part, kernel, [first, second], 1, 32, "the test")
    assert [r.shape for r in read] == [(16,), (16,)] and np.isnan(read[0][:7]).all()
    host = second.buffer.copy_to_host()
    host[15] = np.nan
    second.buffer.copy_to_device(host)
    with pytest.raises(PartError, match=r"wrote nan at index 15 of y, outside its elements 7"):
        kernel_parts._check_margins(part, kernel, [first, second], 1, 32, "the test")


def test_a_result_near_the_guard_value_says_an_input_was_read_past_its_end():
    part, kernel = _a_map_part_and_kernel()
    got = np.array([1.0, kernel_parts.guard_value(np.float64) + 2.0])
    with pytest.raises(PartError, match=r"wrote -1\.7\d*e\+38 at index 1 .*gives 2\.0 \(-1\.7e\+38 "
                                        r"is near the guard values, about -2\*\*127, .* read "
                                        r"past the end"):
        kernel_parts._compare(part, kernel, got, np.array([1.0, 2.0]), "2 elements (exp)")
    with pytest.raises(PartError) as plain:
        kernel_parts._compare(part, kernel, np.array([1.0, 3.0]), np.array([1.0, 2.0]), "x")
    assert "guard" not in str(plain.value)


def make_reading_ahead_map(fn):
    @cuda.jit
    def reading_ahead(out, x):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = fn(x[i + 1])  # one past: the last thread reads beyond x
    return reading_ahead


def test_a_read_past_the_end_of_an_input_is_stopped_on_the_simulator_and_on_a_gpu():
    x = on_cuda(np.linspace(-1, 1, 37))
    with plugged("cuda.map", make_reading_ahead_map):
        with pytest.raises(PartError, match=r"cuda\.map kernel reading_ahead .*(IndexError"
                                            r"|wrote 1\.7\d*e\+38 at index 36 of 37 elements "
                                            r".*read past the end of an input)"):
            tg.neg(x)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_the_plugged_engine_map_and_matmul_give_the_engine_results_in_other_dtypes(dtype):
    values = rng.integers(-9, 9, size=(6, 5)).astype(dtype)
    a, b = on_cuda(values), on_cuda(values.T.copy())
    floats = np.dtype(dtype).kind == "f"
    expected_neg = (-a).cpu().numpy()
    expected_product = (a @ b).cpu().numpy() if floats else None
    with plugged("cuda.map", kernel_parts.engine_map), \
            plugged("cuda.matmul", kernel_parts.engine_matmul):
        got_neg = (-a).cpu().numpy()
        got_product = (a @ b).cpu().numpy() if floats else None
    np.testing.assert_array_equal(got_neg, expected_neg)
    assert got_neg.dtype == dtype
    if floats:  # (the engine's tiled matmul is for floats)
        np.testing.assert_array_equal(got_product, expected_product)
