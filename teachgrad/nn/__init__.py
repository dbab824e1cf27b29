"""``teachgrad.nn``: building blocks for neural networks, after ``torch.nn``.

* :class:`Module` and :class:`Parameter` (``module.py``, ``parameter.py``): the tree of layers
  and the tensors it trains;
* :class:`Sequential` (``containers.py``);
* layers (``layers.py``): :class:`Linear`, :class:`ReLU`, :class:`Tanh`, :class:`Sigmoid`,
  :class:`Softmax`, :class:`LogSoftmax`, :class:`Flatten`, :class:`Dropout`, :class:`Identity`;
* losses (``loss.py``): :class:`MSELoss`, :class:`L1Loss`, :class:`CrossEntropyLoss`, :class:`NLLLoss`;
* :mod:`~teachgrad.nn.functional` (the same things as functions) and :mod:`~teachgrad.nn.init`.
"""
from . import functional, init
from .containers import Sequential
from .layers import Dropout, Flatten, Identity, Linear, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .parameter import Parameter
from . import parallel  # noqa: E402  (DistributedDataParallel; MPI loads only when used)

__all__ = [
    "Module", "Parameter", "Sequential",
    "Linear", "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Flatten", "Dropout", "Identity",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss",
    "functional", "init",
]
