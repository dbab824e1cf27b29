"""``tg.utils.tensorboard``: log training to TensorBoard, after ``torch.utils.tensorboard``.

Needs the ``tensorboard`` package (``pip install "teachgrad[tensorboard]"``): the event
files are written with its own protocol buffers and writer. View them with
``tensorboard --logdir runs --host 127.0.0.1``.
"""
try:
    import tensorboard  # noqa: F401
except ImportError as err:  # pragma: no cover - the extra is installed in CI
    raise ImportError("tg.utils.tensorboard needs the tensorboard package. "
                      "Fix: pip install \"teachgrad[tensorboard]\"") from err

from .writer import SummaryWriter

__all__ = ["SummaryWriter"]
