"""The one list of the chapters' exercises, and what a learner has built so far.

    import teachgrad as tg
    tg.exercises.catalog()                       # every exercise, in chapter order
    tg.exercises.catalog(kind="build")           # the pieces of the engine you write
    tg.exercises.progress()                      # what you solved, which parts run your code

Each :class:`Exercise` says what kind of work it is:

* ``"build"``: you write a piece of the engine itself; ``plugs_into`` names the engine
  parts it replaces (see :mod:`teachgrad.exercises.plugging`), empty when the piece is a
  new one the engine runs as it is (a custom ``Function``);
* ``"kernel"``: a numba.cuda kernel, checked against numpy and from its recorded launch;
* ``"measure"``: a number about speed or work (FLOPs, bytes, time, a queue's depth);
* ``"explain"``: code that shows one idea with the engine (a broadcast rule, a training
  loop, a hook, a search schedule).

The progress report reads what this process has seen: the latest verdict of each
checker that ran (every checker records it) and the parts plugged right now. The
picture of it is :class:`teachgrad.widgets.EngineMap`.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import core
from .plugging import parts as _parts, plugged_parts

KINDS = ("build", "kernel", "measure", "explain")


@dataclass(frozen=True)
class Exercise:
    """One exercise of the chapters."""

    id: str  #: as the chapter numbers it, e.g. "3.4" or "8b.2"
    chapter: str  #: the notebook's number, e.g. "03" or "08b"
    kind: str  #: one of :data:`KINDS`
    title: str
    checker: str  #: the checker's module and name, e.g. "ch03.check_topological_order"
    plugs_into: tuple[str, ...] = ()  #: engine parts a build exercise replaces


def _e(id: str, kind: str, title: str, checker: str, *plugs_into: str) -> Exercise:
    chapter = checker.split(".")[0].removeprefix("ch")
    return Exercise(id, chapter, kind, title, checker, tuple(plugs_into))


_EXERCISES = (
    _e("1.1", "measure", "peak FP32 speed", "ch01.check_peak_fp32_tflops"),
    _e("1.2", "measure", "FLOPs of a matrix multiply-accumulate", "ch01.check_mma_flops"),
    _e("2.1", "explain", "the broadcast shape", "ch02.check_broadcast_shape"),
    _e("2.2", "explain", "all distances at once", "ch02.check_pairwise_sq_distances"),
    _e("2.3", "explain", "keep the work on the device", "ch02.check_min_max_scale_on_device"),
    _e("2.4", "build", "sum a gradient back to its input's shape", "ch02.check_sum_to_shape",
       "autograd.sum_to_shape"),
    _e("3.1", "explain", "gradients of a linear model, by hand", "ch03.check_linear_mse_grads"),
    _e("3.2", "explain", "a batch gradient from micro-batches",
       "ch03.check_gradient_by_microbatches"),
    _e("3.3", "explain", "a training loop with nothing but autograd", "ch03.check_train_linear"),
    _e("3.4", "build", "a topological order", "ch03.check_topological_order", "autograd.order"),
    _e("4.1", "build", "sigmoid as one Function", "ch04.check_sigmoid_function"),
    _e("4.2", "build", "a linear layer as one Function", "ch04.check_linear_function"),
    _e("4.3", "build", "the backward of * and /", "ch04.check_elementwise_backward",
       "backward:Mul", "backward:Div"),
    _e("4.4", "build", "the backward of @ and sum", "ch04.check_matmul_sum_backward",
       "backward:MatMul", "backward:Sum"),
    _e("5.1", "explain", "a two-layer network", "ch05.check_two_layer_net"),
    _e("5.2", "explain", "one epoch of training", "ch05.check_train_epoch"),
    _e("5.3", "explain", "accuracy", "ch05.check_accuracy"),
    _e("5.4", "build", "SGD with momentum, the optimizer's own step",
       "ch05.check_sgd_momentum_step", "optim.sgd_step"),
    _e("5.5", "build", "Adam's step", "ch05.check_adam_step", "optim.adam_step"),
    _e("6.1", "kernel", "a grid-stride SAXPY", "ch06.check_saxpy"),
    _e("6.2", "measure", "how many passes?", "ch06.check_passes_per_thread"),
    _e("6.3", "build", "your map runs the cuda device", "ch06.check_map", "cuda.map"),
    _e("7.1", "kernel", "a block-level max", "ch07.check_block_max"),
    _e("7.2", "kernel", "find and fix a missing barrier", "ch07.check_fixed_sum_of_squares"),
    _e("7.3", "build", "your tree becomes the cuda device's sum", "ch07.check_block_sum",
       "cuda.reduce"),
    _e("8.1", "measure", "global reads of the tiled kernel", "ch08.check_tiled_global_reads"),
    _e("8.2", "kernel", "the load step", "ch08.check_load_phase"),
    _e("8.3", "build", "your tiled kernel runs the cuda device's @", "ch08.check_tiled_matmul",
       "cuda.matmul"),
    _e("8b.1", "kernel", "histogram", "ch08b.check_histogram"),
    _e("8b.2", "kernel", "block scan", "ch08b.check_block_scan"),
    _e("8b.3", "kernel", "convolution with a halo", "ch08b.check_conv1d"),
    _e("8b.4", "kernel", "transpose through a padded tile", "ch08b.check_transpose"),
    _e("8b.5", "kernel", "row softmax", "ch08b.check_row_softmax"),
    _e("8b.6", "kernel", "matrix-vector product", "ch08b.check_matvec"),
    _e("8b.7", "kernel", "im2col", "ch08b.check_im2col"),
    _e("8b.8", "kernel", "row argmax", "ch08b.check_row_argmax"),
    _e("9.1", "measure", "a timing function", "ch09.check_median_time"),
    _e("9.2", "measure", "arithmetic intensity of a matmul", "ch09.check_matmul_intensity"),
    _e("9.3", "measure", "the roofline", "ch09.check_attainable_gflops"),
    _e("10.1", "measure", "how far the host runs ahead", "ch10.check_max_in_flight"),
    _e("10.2", "measure", "device time from events", "ch10.check_device_time_ms"),
    _e("10.3", "explain", "run ahead, but not too far", "ch10.check_train_bounded"),
    _e("11.1", "explain", "make the choice part of the graph", "ch11.check_traceable_choice"),
    _e("11.2", "explain", "find the input a trace gets wrong", "ch11.check_first_divergence"),
    _e("11.3", "build", "write a compiler pass: dead code", "ch11.check_dead_code_elimination",
       "compile.eliminate_dead_code"),
    _e("11.4", "build", "common-subexpression elimination inside tg.compile",
       "ch11.check_common_subexpression_elimination", "compile.eliminate_common_subexpressions"),
    _e("12.1", "explain", "a hook that counts calls", "ch12.check_call_counter"),
    _e("12.2", "explain", "a gradient-norm logger", "ch12.check_log_grad_norms"),
    _e("12.3", "measure", "which layer is dead?", "ch12.check_dead_fractions"),
    _e("13.1", "explain", "random search, by hand", "ch13.check_random_search"),
    _e("13.2", "build", "one step of successive halving", "ch13.check_promote", "tune.promote"),
    _e("13.3", "explain", "the Hyperband schedule", "ch13.check_hyperband_schedule"),
    _e("14.1", "explain", "the gradient every rank steps with",
       "ch14.check_data_parallel_gradient"),
    _e("14.2", "explain", "the ring's schedule", "ch14.check_ring_send_chunk"),
    _e("14.3", "build", "your ring all-reduce, inside DDP", "ch14.check_ring_all_reduce",
       "distributed.ring_all_reduce"),
    _e("14.4", "explain", "a sampler's shards", "ch14.check_shard_indices"),
    _e("15.1", "explain", "weights from Keras", "ch15.check_from_keras"),
    _e("15.2", "explain", "read the file", "ch15.check_describe_onnx"),
    _e("15.3", "explain", "export and serve a model", "ch15.check_export_and_serve"),
    _e("16.1", "measure", "self time, from the raw trace", "ch16.check_self_times"),
    _e("16.2", "explain", "train by replaying a CUDA graph", "ch16.check_train_with_graph"),
    _e("16.3", "build", "checkpointing's recomputing Function", "ch16.check_recompute"),
    _e("16.4", "build", "DataParallel's scatter and gather", "ch16.check_scatter_gather"),
    _e("17.1", "build", "scaled dot-product attention, inside MultiheadAttention",
       "ch17.check_attention", "nn.scaled_dot_product_attention"),
    _e("17.2", "build", "the online softmax inside the tiled attention kernel",
       "ch17.check_online_softmax", "cuda.online_softmax"),
    _e("17.3", "build", "loss scaling: the scale's update rule", "ch17.check_update_scale",
       "amp.update_scale"),
)


def catalog(chapter: str | int | None = None, kind: str | None = None) -> list[Exercise]:
    """The exercises, in chapter order; ``chapter`` (``3``, ``"03"``, ``"8b"``) and ``kind``
    keep only those."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    wanted = None
    if chapter is not None:
        text = str(chapter).lower()
        wanted = text.zfill(2) if text.isdigit() else text.zfill(3)
        if not any(e.chapter == wanted for e in _EXERCISES):
            raise ValueError(f"no chapter {chapter!r}: the chapters with exercises are "
                             f"{', '.join(sorted({e.chapter for e in _EXERCISES}))}")
    return [e for e in _EXERCISES
            if (wanted is None or e.chapter == wanted) and (kind is None or e.kind == kind)]


@dataclass(frozen=True)
class PartState:
    """One engine part a build exercise replaces, and whose code runs it now."""

    name: str
    exercises: tuple[str, ...]  #: the exercises that build it
    plugged: bool  #: your function runs as this part right now
    solved: bool  #: every exercise that builds it was solved in this session


@dataclass(frozen=True)
class Progress:
    """What :func:`progress` found: each exercise's latest verdict and each part's state."""

    status: dict  #: exercise id -> "solved", "wrong", "error", "not solved yet" or "not run"
    parts: tuple[PartState, ...]

    def solved(self) -> list[str]:
        return [e for e, s in self.status.items() if s == core.SOLVED]

    def __str__(self) -> str:
        lines = [f"{len(self.solved())} of {len(self.status)} exercises solved in this session"]
        for part in self.parts:
            who = ("your code (plugged)" if part.plugged else
                   "yours (solved), not plugged now" if part.solved else "the engine's")
            lines.append(f"  {part.name:24} {who:32} exercise {', '.join(part.exercises)}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython shows the text report
        printer.text(str(self))


def progress() -> Progress:
    """Every exercise's latest verdict in this process, and which engine parts are yours."""
    seen = core.latest_verdicts()
    status = {e.id: seen.get(e.id, "not run") for e in _EXERCISES}
    known = _parts()
    plugged = plugged_parts()
    builders: dict[str, list[str]] = {}
    for e in _EXERCISES:
        for name in e.plugs_into:
            builders.setdefault(name, []).append(e.id)
    states = []
    for name, ids in builders.items():
        if not name.startswith("backward:") and name not in known:
            continue  # a part this install does not have (never expected: tested)
        states.append(PartState(name, tuple(ids), name in plugged,
                                all(status[i] == core.SOLVED for i in ids)))
    return Progress(status, tuple(states))
