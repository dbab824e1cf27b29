"""The ``Tensor``: an array on a device, plus what autograd needs to know about it.

A tensor holds a backend array (``tensor.array``: a numpy array on ``cpu``, a
numba device array on ``cuda``), and for autograd ``requires_grad``, ``grad``
and ``grad_fn`` (the graph node that made it). All arithmetic is defined in
:mod:`teachgrad.ops`; the methods here only forward to it.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Callable

import numpy as np

from . import dtypes
from .autograd import function as _function_module
from .autograd.engine import run_backward
from .autograd.function import AccumulateGrad
from .backends import get_backend
from .backends.low_precision import LowPrecisionBackend as _LowPrecisionBackend, low_precision
from .cuda_devices import using
from .device import Device, as_device
from ._repr import tensor_repr
from .tensor_data import check_flag as _check_flag, host_array


_new_object = object.__new__
_DTYPES = dtypes._BY_NUMPY  # numpy dtype -> DType, for Tensor._make
_LOW = frozenset(dtypes.LOW_PRECISION)
BFLOAT16_ON_CUDA = (
    "teachgrad's cuda device does not support bfloat16: its kernels are numba.cuda ones, and "
    "numba has no bfloat16 type. Fix: use tg.float16 on cuda (stored in 16 bits, computed by "
    "the float32 kernels and rounded once), or keep bfloat16 tensors on cpu.")


class Size(tuple):
    """A tensor's shape: a tuple that prints like PyTorch's ``torch.Size``."""

    def __repr__(self) -> str:
        return f"teachgrad.Size({list(self)})"

    def numel(self) -> int:
        return math.prod(self)


class _RemovableHandle:
    """What ``register_hook`` returns: call ``.remove()`` to take the hook off."""

    def __init__(self, hooks: list, hook: Callable, owner: Any = None) -> None:
        self._hooks, self._hook = hooks, hook
        # a leaf's AccumulateGrad, told when a hook comes off (weakly: a handle kept
        # around must not keep the leaf alive)
        self._owner = None if owner is None else weakref.ref(owner)

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)
            owner = None if self._owner is None else self._owner()
            if owner is not None:
                owner._hooks_removed()


class Tensor:
    """A multi-dimensional array with autograd, API after ``torch.Tensor``.

    This module holds what a tensor *is* (its array, dtype, device, and what autograd
    keeps on it). What it can *do* comes from the modules above it, which attach their
    methods to this class: the math and conversions from ``tensor_methods.py`` (each
    one a function of :mod:`teachgrad.ops`), the in-place updates from
    ``tensor_inplace.py``. So imports point one way: ``ops`` imports ``Tensor``, never
    the reverse.
    """

    __array_priority__ = 1000  # numpy defers `ndarray * tensor` to us
    # A fixed set of fields (no per-tensor __dict__): tensors are made by the
    # thousand, and this makes each one smaller and quicker to make and to read.
    __slots__ = ("_array", "_backend", "device", "dtype", "requires_grad", "_grad", "grad_fn",
                 "_output_nr", "_version_counter", "_accumulate_node", "_retains_grad",
                 "__weakref__")

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> None:
        """``tg.Tensor(2, 3)`` is a (2, 3) tensor of zeros; ``tg.Tensor([1, 2])`` copies data.

        As in PyTorch, the class constructor makes the default float dtype; use
        ``tg.tensor(data)`` to keep the data's own dtype (or to make a 0-d tensor).
        """
        dtype = dtype if dtype is not None else dtypes.get_default_dtype()
        sizes = all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
        if args and sizes:
            data: Any = np.zeros(tuple(int(a) for a in args), dtypes.get_dtype(dtype).numpy)
        elif len(args) > 1:
            raise TypeError(f"tg.Tensor() takes sizes (ints) or one sequence of data, not {args!r}")
        else:
            data = args[0] if args else ()
            if isinstance(data, (float, bool, complex)):
                raise TypeError(f"tg.Tensor(): data must be a sequence (got {type(data).__name__}). "
                                f"Fix: tg.tensor({data!r}) makes a 0-d tensor")
        made = tensor(data, dtype=dtype, device=device)
        self._init(made._array, made._backend, made.device)
        if requires_grad:
            self.requires_grad_(True)

    # -- construction (internal) ---------------------------------------------
    def _init(self, array: Any, backend: Any, device: Device) -> None:
        """Fill a new instance (of a subclass too, e.g. Parameter) as ``_make`` fills a tensor."""
        made = Tensor._make(array, backend, device)
        for field in Tensor.__slots__[:-1]:  # (all but __weakref__)
            setattr(self, field, getattr(made, field))

    @staticmethod
    def _make(array: Any, backend: Any, device: Device) -> "Tensor":
        """A new tensor around ``array``: what every operation's output is made by, so
        it is written out field by field (no calls: it runs for every operation)."""
        t = _new_object(Tensor)
        t._array = array
        t.device = device
        t.dtype = dtype = _DTYPES.get(array.dtype) or dtypes.from_numpy_dtype(array.dtype)
        if dtype in _LOW:  # 16-bit floats compute in float32 (backends/low_precision.py)
            if dtype is dtypes.bfloat16 and device.type == "cuda":
                raise TypeError(BFLOAT16_ON_CUDA)
            backend = low_precision(backend)
        elif type(backend) is _LowPrecisionBackend:
            backend = backend.base
        t._backend = backend
        t.requires_grad = False
        t._grad = None  # the slot itself: the grad setter's checks are for users
        t.grad_fn = None
        t._output_nr = 0
        t._version_counter = [0]  # one list shared by every view of the same storage
        t._accumulate_node = None
        t._retains_grad = False
        return t

    @staticmethod
    def _make_as(array: Any, like: "Tensor") -> "Tensor":
        """``_make(array, like's backend, like's device)``, shorter when ``array`` has
        ``like``'s own dtype (an elementwise result): the dtype and backend are like's."""
        if array.dtype is not like._array.dtype:
            return Tensor._make(array, like._backend, like.device)
        t = _new_object(Tensor)
        t._array = array
        t.device = like.device
        t.dtype = like.dtype
        t._backend = like._backend
        t.requires_grad = False
        t._grad = None
        t.grad_fn = None
        t._output_nr = 0
        t._version_counter = [0]
        t._accumulate_node = None
        t._retains_grad = False
        return t

    # -- what a tensor is ------------------------------------------------------
    @property
    def array(self) -> Any:
        """The backend array holding the data (numpy on cpu, numba device array on cuda)."""
        return self._array

    @property
    def shape(self) -> Size:
        return Size(self._array.shape)

    @property
    def ndim(self) -> int:
        return len(self._array.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self._array.shape[dim]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self._array.shape)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._array.shape[0]

    def stride(self, dim: int | None = None) -> Any:
        """How many elements to step in memory to move one along each dimension."""
        arr = self._array
        if isinstance(arr, np.ndarray):
            strides = tuple(s // arr.itemsize for s in arr.strides)
        else:
            strides = tuple(arr.strides)  # the cuda backend's StridedArray counts elements
        return strides if dim is None else strides[dim]

    def is_contiguous(self) -> bool:
        """Whether the elements sit in row-major order in memory (``x.T`` usually does not)."""
        return self._backend.is_contiguous(self._array)

    @property
    def is_leaf(self) -> bool:
        """True for tensors not made by a recorded operation (inputs, parameters)."""
        return self.grad_fn is None

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def element_size(self) -> int:
        return self.dtype.itemsize

    # -- getting values out ----------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a copy)."""
        if self.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on a tensor that requires grad: the array would not be "
                "part of the graph. Fix: use tensor.detach().numpy()."
            )
        if self.device.type != "cpu":
            raise TypeError(
                f"can't convert a {self.device} tensor to numpy. Fix: copy it to the host "
                "first with tensor.cpu()."
            )
        return self._backend.to_numpy(self._array)

    def _host(self) -> np.ndarray:
        return self._backend.to_numpy(self._array)

    def item(self) -> int | float | bool:
        """The single value of a one-element tensor, as a Python number."""
        if self.numel() != 1:
            raise RuntimeError(
                f"a tensor with {self.numel()} elements cannot be converted to a Python "
                f"number: item() needs exactly one element (shape {list(self.shape)}). "
                "Fix: index one element first (t[0].item()) or use tolist()."
            )
        return self._host().reshape(()).item()

    def tolist(self) -> Any:
        return self._host().tolist()

    def __float__(self) -> float:
        self._check_one_element()
        return float(self.item())

    def __int__(self) -> int:
        self._check_one_element()
        return int(self.item())

    def _check_one_element(self) -> None:
        if self.numel() != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars, this "
                             f"one has {self.numel()}. Fix: index one element first, e.g. t[0]")

    def __index__(self) -> int:
        if self.dtype is not dtypes.int64 or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous. "
                "Fix: use .any() or .all(), or compare one element."
            )
        return bool(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.detach()._host()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return tensor_repr(self)

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # -- autograd ----------------------------------------------------------------
    @property
    def grad(self) -> "Tensor | None":
        """The gradient backward accumulated here (``None`` until then)."""
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        # Checked at assignment, as in PyTorch: an optimizer must never meet a bad .grad.
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(value).__name__}. Fix: assign a tensor like the parameter")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size {list(value.shape)} to "
                                   f"a tensor of size {list(self.shape)}. Please ensure that the "
                                   "gradient and the tensor are the same size")
            if value.dtype is not self.dtype:
                raise RuntimeError(f"attempting to assign a gradient with dtype {value.dtype} to a "
                                   f"tensor with dtype {self.dtype}. Fix: convert it, g.to({self.dtype})")
            if value.device != self.device:
                raise RuntimeError(f"attempting to assign a gradient on {value.device} to a tensor "
                                   f"on {self.device}. Fix: move it, g.to('{self.device}')")
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Mark a leaf so that backward computes its ``.grad`` (in place)."""
        _check_flag("requires_grad", requires_grad)
        if not self.is_leaf and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad of leaf tensors; this one was made by "
                f"{self.grad_fn.name()}. Fix: use .detach() to get a tensor outside the graph."
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(
                f"only tensors of floating point dtype can require gradients, not {self.dtype}. "
                "Fix: convert first, e.g. t.float().requires_grad_()"
            )
        self.requires_grad = requires_grad
        return self

    def detach(self) -> "Tensor":
        """The same data, cut out of the graph (shares storage, like PyTorch).

        It also shares the version counter: changing the detached tensor in place
        is noticed by a backward that saved the original.
        """
        t = Tensor._make(self._array, self._backend, self.device)
        t._version_counter = self._version_counter
        return t

    @property
    def _version(self) -> int:
        """How many in-place changes this tensor's storage has had (views share the count)."""
        return self._version_counter[0]

    def _bump_version(self) -> None:
        self._version_counter[0] += 1

    def detach_(self) -> "Tensor":
        self.grad_fn = None
        self.requires_grad = False
        return self

    @property
    def data(self) -> "Tensor":
        """A detached tensor sharing this one's storage (``p.data`` in old-style updates)."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        # may move the tensor (Module.to does `p.data = p.data.to("cuda")`)
        self._set_array(value._array)
        self._backend, self.device = value._backend, value.device

    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool = False) -> None:
        """Backpropagate from this tensor, adding gradients into every leaf's ``.grad``."""
        run_backward(self, gradient, retain_graph)

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> _RemovableHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a new one."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self.grad_fn if self.grad_fn is not None else self._accumulator()
        hooks = node.pre_hooks.setdefault(self._output_nr, [])
        hooks.append(hook)
        return _RemovableHandle(hooks, hook, node if self.grad_fn is None else None)

    def register_post_accumulate_grad_hook(
            self, hook: Callable[["Tensor"], None]) -> _RemovableHandle:
        """Call ``hook(self)`` each time backward has added into this leaf's ``.grad``.

        As in PyTorch: only for leaves, and the hook sees the accumulated ``.grad``
        (DistributedDataParallel uses it to send a gradient as soon as it is final).
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if not self.is_leaf:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors: "
                "a non-leaf has no .grad to accumulate into. Fix: use register_hook(hook)")
        node = self._accumulator()
        hooks = node.post_hooks
        hooks.append(hook)
        return _RemovableHandle(hooks, hook, node)

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf tensor after backward (leaves always keep it)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False: it gets "
                               "no gradient. Fix: make it from inputs that require grad")
        if self.is_leaf or self._retains_grad:
            return
        ref = weakref.ref(self)

        def keep(grad: Tensor) -> None:
            me = ref()
            if me is not None:
                me.grad = grad.clone() if me.grad is None else me.grad + grad

        keep.retains_grad = True  # the engine runs this hook after the user's ones
        self.register_hook(keep)
        self._retains_grad = True

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def _accumulator(self) -> AccumulateGrad:
        if self._accumulate_node is None:
            self._accumulate_node = AccumulateGrad(self)
        return self._accumulate_node


# autograd.function needs the Tensor class but is imported before it exists (this
# module imports it), so the class is handed over here, once.
_function_module.Tensor = Tensor


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Make a tensor from data (nested lists, numbers, numpy arrays), copying it."""
    device = as_device(device)
    if isinstance(data, Tensor):
        arr = data.detach()._host()
    else:
        arr = host_array(data)
    if dtype is not None:
        want = dtypes.get_dtype(dtype)
    elif arr.dtype.kind == "f" and not isinstance(data, np.ndarray):
        want = dtypes.get_default_dtype()  # Python floats become float32, like PyTorch
    elif arr.dtype.kind in "iu" and arr.size == 0 and not isinstance(data, np.ndarray):
        want = dtypes.get_default_dtype()  # tg.tensor([]) is float, like PyTorch
    else:
        want = dtypes.from_numpy_dtype(arr.dtype)
    _check_flag("requires_grad", requires_grad)
    arr = np.asarray(arr, dtype=want.numpy, order="C")
    backend = get_backend(device.type)
    with using(device.index):  # the copy goes to that device's stream
        t = Tensor._make(backend.from_numpy(arr), backend, device)
    if requires_grad:
        t.requires_grad_(True)
    return t



def is_tensor(obj: Any) -> bool:
    """``True`` when ``obj`` is a teachgrad tensor (a Parameter is one too), as ``torch.is_tensor``."""
    return isinstance(obj, Tensor)
