"""``SummaryWriter``: write what a training run does to files TensorBoard reads.

After ``torch.utils.tensorboard.SummaryWriter``::

    writer = SummaryWriter("runs/spirals")
    for step in range(100):
        ...
        writer.add_scalar("loss/train", loss.item(), step)
    writer.close()

then, in a terminal: ``tensorboard --logdir runs --host 127.0.0.1``.

Events go through the ``tensorboard`` package's own ``EventFileWriter`` (a
background thread appends them to an ``events.out.tfevents.*`` file). Anything
else that wants the same numbers — a live chart in the notebook — can listen:
``writer.add_listener(curves)`` passes every ``add_scalar`` on to
``curves.add_scalar(tag, value, step, walltime)``.
"""
from __future__ import annotations

import os
import socket
import tempfile
import time
from datetime import datetime
from typing import Any

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ... import graph as tg_graph
from ...tensor import Tensor
from . import summary


def _check_writable(log_dir: str) -> None:
    """Make ``log_dir`` and prove a file can be written there, or say why not."""
    try:
        os.makedirs(log_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=log_dir, prefix=".teachgrad-probe-"):
            pass
    except OSError as err:
        raise PermissionError(
            f"SummaryWriter cannot write to log_dir {log_dir!r} ({type(err).__name__}: "
            f"{err.strerror or err}). Fix: pass a directory you can write to, e.g. "
            "SummaryWriter('runs/my_experiment')"
        ) from None


def _check_tag(tag: Any) -> str:
    if not isinstance(tag, str) or not tag:
        raise TypeError(f"a tag is a non-empty string such as 'loss/train', got {tag!r}")
    return tag


def _check_step(step: Any) -> int | None:
    if step is None:
        return None
    if isinstance(step, Tensor):
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, int) and not hasattr(step, "__index__"):
        raise TypeError(f"global_step must be an int (the training step), got {step!r}")
    return int(step)


class SummaryWriter:
    """Writes scalars, histograms, the model's graph and hyperparameters for TensorBoard.

    ``log_dir`` defaults to ``runs/<date>_<host><comment>``. It is created (and checked
    writable) right away, so a bad path fails here and not at the first ``add_*``.
    """

    def __init__(self, log_dir: str | os.PathLike | None = None, comment: str = "",
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        if not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"log_dir must be a path, got {type(log_dir).__name__}")
        log_dir = os.fspath(log_dir)
        _check_writable(log_dir)
        self.log_dir = log_dir
        self._options = (max_queue, flush_secs, filename_suffix)
        self._writer: EventFileWriter | None = EventFileWriter(log_dir, *self._options)
        self._scalars_writers: dict[str, EventFileWriter] = {}
        self._listeners: list[Any] = []

    def get_logdir(self) -> str:
        return self.log_dir

    # -- listeners ---------------------------------------------------------------
    def add_listener(self, listener: Any) -> Any:
        """Also send every ``add_scalar`` to ``listener.add_scalar(tag, value, step, walltime)``."""
        if not callable(getattr(listener, "add_scalar", None)):
            raise TypeError(f"a listener needs an add_scalar(tag, value, step, walltime) method; "
                            f"{type(listener).__name__} has none")
        self._listeners.append(listener)
        return listener

    # -- writing -----------------------------------------------------------------
    def _file_writer(self) -> EventFileWriter:
        if self._writer is None:
            raise RuntimeError("this SummaryWriter is closed. Fix: make a new one")
        return self._writer

    def _add(self, writer: EventFileWriter, step: int | None, walltime: float | None,
             **fields: Any) -> None:
        event = Event(wall_time=time.time() if walltime is None else walltime, **fields)
        if step is not None:
            event.step = step
        writer.add_event(event)

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None) -> None:
        """One point of the curve ``tag`` (``scalar_value`` a number or 1-element tensor)."""
        _check_tag(tag)
        value = summary.as_number(scalar_value, f"add_scalar('{tag}') value")
        step = _check_step(global_step)
        writer = self._file_writer()
        walltime = time.time() if walltime is None else walltime
        self._add(writer, step, walltime, summary=summary.scalar(tag, value))
        for listener in self._listeners:
            listener.add_scalar(tag, value, step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several curves on one chart: each key is its own run, ``<log_dir>/<main_tag>_<key>``."""
        _check_tag(main_tag)
        if not isinstance(tag_scalar_dict, dict) or not tag_scalar_dict:
            raise TypeError("add_scalars takes a non-empty dict such as {'train': 0.3, 'val': 0.4}")
        values = {k: summary.as_number(v, f"add_scalars('{main_tag}')['{k}']")
                  for k, v in tag_scalar_dict.items()}
        step = _check_step(global_step)
        self._file_writer()
        walltime = time.time() if walltime is None else walltime
        for key, value in values.items():
            run_dir = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{key}")
            if run_dir not in self._scalars_writers:
                self._scalars_writers[run_dir] = EventFileWriter(run_dir, *self._options)
            self._add(self._scalars_writers[run_dir], step, walltime,
                      summary=summary.scalar(main_tag, value))
            for listener in self._listeners:
                listener.add_scalar(f"{main_tag}/{key}", value, step, walltime)

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None,
                      bins: Any = "tensorflow", walltime: float | None = None,
                      max_bins: int | None = None) -> None:
        """The distribution of ``values`` (weights, activations, gradients) at one step.

        As in PyTorch: a parameter that requires grad is read as it is (detached), the
        default ``bins="tensorflow"`` uses TensorFlow's fixed edges (fine near zero,
        coarse far away), or any ``np.histogram`` rule or number of bins; ``max_bins``
        merges neighbouring buckets down to at most that many."""
        _check_tag(tag)
        summary.check_bins(bins, max_bins)
        array = values.detach().cpu().numpy() if isinstance(values, Tensor) else values
        histo = summary.histogram(tag, array, bins, max_bins)
        self._add(self._file_writer(), _check_step(global_step), walltime, summary=histo)

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False) -> None:
        """The autograd graph of ``model(input_to_model)``, each operation inside the box of
        the module that ran it (read from :func:`teachgrad.graph.snapshot`)."""
        if not hasattr(model, "named_parameters") or not callable(model):
            raise TypeError(f"add_graph takes an nn.Module, got {type(model).__name__}")
        if input_to_model is None:
            raise TypeError("add_graph needs an example input: add_graph(model, x)")
        args = input_to_model if isinstance(input_to_model, tuple) else (input_to_model,)
        output = model(*args)
        output = output[0] if isinstance(output, tuple) else output
        if not isinstance(output, Tensor) or output.grad_fn is None:
            raise RuntimeError("add_graph found no recorded operations: the model's output has "
                               "no grad_fn. Fix: call it outside tg.no_grad(), with parameters "
                               "that require grad")
        names = dict(model.named_parameters())
        snap = tg_graph.snapshot(output, names=names, max_nodes=10_000, group_by=model)
        graph = summary.graph_def(snap)
        if verbose:
            print(graph)
        self._add(self._file_writer(), None, None, graph_def=graph.SerializeToString())

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, run_name: str | None = None,
                    global_step: int | None = None) -> None:
        """One run's hyperparameters and final metrics, for the HParams dashboard (written
        to a sub-run ``<log_dir>/<run_name>``, with the metrics as scalars there too)."""
        summary.check_hparam_values(hparam_dict, metric_dict)
        step = _check_step(global_step)
        self._file_writer()
        run_dir = os.path.join(self.log_dir, run_name or str(time.time()))
        _check_writable(run_dir)
        writer = EventFileWriter(run_dir, *self._options)
        try:
            for part in summary.hparams(hparam_dict, metric_dict):
                self._add(writer, step, None, summary=part)
            for tag, value in metric_dict.items():
                self._add(writer, step, None,
                          summary=summary.scalar(tag, summary.as_number(value, tag)))
        finally:
            writer.close()

    # -- lifetime ----------------------------------------------------------------
    def flush(self) -> None:
        """Write every pending event to disk now."""
        for writer in [self._writer, *self._scalars_writers.values()]:
            if writer is not None:
                writer.flush()

    def close(self) -> None:
        """Flush and close the files; closing twice is harmless."""
        for writer in [self._writer, *self._scalars_writers.values()]:
            if writer is not None:
                writer.close()
        self._writer = None
        self._scalars_writers = {}

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
