"""``teachgrad.nn``: building blocks for neural networks, after ``torch.nn``.

* :class:`Module` and :class:`Parameter` (``module.py``, ``parameter.py``): the tree of layers
  and the tensors it trains;
* :class:`Sequential` (``containers.py``);
* layers (``layers.py``): :class:`Linear`, :class:`ReLU`, :class:`Tanh`, :class:`Sigmoid`,
  :class:`Softmax`, :class:`LogSoftmax`, :class:`Flatten`, :class:`Dropout`, :class:`Identity`;
* activations beyond ReLU (``activations.py``): :class:`GELU`, :class:`SiLU`,
  :class:`LeakyReLU`, :class:`ELU`, :class:`Softplus`;
* more activations (``more_activations.py``): :class:`Hardtanh`, :class:`ReLU6`, :class:`SELU`,
  :class:`Mish`, :class:`Hardswish`, :class:`Hardsigmoid`, :class:`LogSigmoid`;
* losses (``loss.py``): :class:`MSELoss`, :class:`L1Loss`, :class:`CrossEntropyLoss`, :class:`NLLLoss`;
  binary cross-entropy (``losses_binary.py``): :class:`BCELoss`, :class:`BCEWithLogitsLoss`;
* convolution and pooling (``conv.py``): :class:`Conv2d`, :class:`MaxPool2d`, :class:`AvgPool2d`;
  :class:`Conv1d` (``conv1d.py``, a ``Conv2d`` one pixel high);
* normalisation (``norm.py``): :class:`BatchNorm1d`, :class:`BatchNorm2d`, :class:`LayerNorm`;
  :class:`GroupNorm` (``group_norm.py``);
* adaptive pooling (``adaptive_pool.py``): :class:`AdaptiveAvgPool2d`, :class:`AdaptiveMaxPool2d`;
* :class:`Embedding` (``sparse.py``);
* attention (``attention.py``, ``multihead_attention.py``, ``transformer.py``):
  ``functional.scaled_dot_product_attention``, :class:`MultiheadAttention`,
  :class:`TransformerEncoderLayer`, :class:`TransformerEncoder`;
* recurrent layers (``recurrent.py``): :class:`RNN`, :class:`LSTM`, :class:`GRU`, and their
  one-step cells (``recurrent_cells.py``): :class:`RNNCell`, :class:`LSTMCell`, :class:`GRUCell`;
* :mod:`~teachgrad.nn.functional` (the same things as functions), :mod:`~teachgrad.nn.init`,
  ``arguments.py`` (the argument checks layers share) and
  :mod:`~teachgrad.nn.utils` (``clip_grad_norm_``, ``clip_grad_value_``, ``rnn.pad_sequence``).
"""
from . import functional, init
from . import utils
from .activations import ELU, GELU, LeakyReLU, SiLU, Softplus
from .more_activations import SELU, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish, ReLU6
from .adaptive_pool import AdaptiveAvgPool2d, AdaptiveMaxPool2d
from .containers import ModuleDict, ModuleList, Sequential
from .conv import AvgPool2d, Conv2d, MaxPool2d
from .conv1d import Conv1d
from .layers import Dropout, Dropout2d, Flatten, Identity, Linear, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .losses_binary import BCELoss, BCEWithLogitsLoss
from .module import Module
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm
from .group_norm import GroupNorm
from .parameter import Parameter
from .sparse import Embedding
from .recurrent import GRU, LSTM, RNN, RNNBase
from .recurrent_cells import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .multihead_attention import MultiheadAttention
from .transformer import TransformerEncoder, TransformerEncoderLayer
from . import parallel  # noqa: E402  (DistributedDataParallel; MPI loads only when used)
from .parallel import DataParallel  # noqa: E402

__all__ = [
    "Module", "Parameter", "DataParallel", "Sequential", "ModuleList", "ModuleDict",
    "Linear", "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Flatten", "Dropout", "Dropout2d", "Identity",
    "GELU", "SiLU", "LeakyReLU", "ELU", "Softplus",
    "Hardtanh", "ReLU6", "SELU", "Mish", "Hardswish", "Hardsigmoid", "LogSigmoid",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "GroupNorm",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
    "Conv1d", "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding",
    "functional", "init", "utils",
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
]


def __getattr__(name: str):
    # a torch.nn name teachgrad lacks says so (teachgrad/unsupported.py)
    from teachgrad.unsupported import module_attribute_error
    raise module_attribute_error(__name__, name)
