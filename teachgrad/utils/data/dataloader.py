"""``DataLoader``: batches from a dataset, in the order a sampler gives.

    loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
    for xb, yb in loader:
        ...

teachgrad loads every batch in the calling process, when the loop asks for
it: there are no worker processes (``num_workers`` is accepted and ignored,
with a warning) and no pinned memory.
"""
from __future__ import annotations

import collections.abc
import copy
import warnings
from typing import Any, Callable, Iterable, Iterator

import numpy as np

import teachgrad as tg
from teachgrad.tensor import Tensor

from .dataset import Dataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


def default_collate(batch: list[Any]) -> Any:
    """Stack a list of samples into one batch, as PyTorch's ``default_collate``.

    Tensors and numpy arrays are stacked along a new first dimension; Python
    ints become an int64 tensor and floats a float64 one; strings stay a list;
    dicts, tuples and lists are collated field by field (a tuple of fields comes
    back as a list, as in PyTorch, except a namedtuple, which keeps its type).
    """
    first = batch[0]
    if isinstance(first, Tensor):
        return tg.stack(batch)
    if isinstance(first, np.ndarray):
        return tg.stack([tg.from_numpy(np.ascontiguousarray(a)) for a in batch])
    if isinstance(first, (bool, np.bool_)):
        return tg.tensor(batch, dtype=tg.bool)
    if isinstance(first, (int, np.integer)):
        return tg.tensor(batch, dtype=tg.int64)
    if isinstance(first, (float, np.floating)):
        return tg.tensor(batch, dtype=tg.float64)
    if isinstance(first, str):
        return list(batch)
    if isinstance(first, collections.abc.Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple
        return type(first)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(field)) for field in zip(*batch)]
    raise TypeError(
        f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(first).__name__}. Fix: pass collate_fn= to build batches of it yourself."
    )


def default_convert(data: Any) -> Any:
    """One sample made of tensors, as PyTorch's ``default_convert`` (what a loader with
    ``batch_size=None`` applies to each sample): numpy arrays and numpy scalars become
    tensors (copied, as ``tg.from_numpy`` does: PyTorch's share the array's memory),
    string and object arrays stay arrays; a
    tuple becomes a list (a namedtuple keeps its type), dicts and lists are converted
    inside; Python numbers, strings and anything else are left as they are.
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        if data.dtype.kind in "SaUO":  # strings and objects: no tensor can hold them
            return data
        return tg.from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _same_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch returns
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_sequence(data, [default_convert(d) for d in data])
    return data


def _same_mapping(data: Any, converted: dict) -> Any:
    """``converted`` in ``data``'s own mapping type where that type allows it, else a dict."""
    try:
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(converted)
            return clone
        return type(data)(converted)
    except TypeError:
        return converted


def _same_sequence(data: Any, converted: list) -> Any:
    """``converted`` in ``data``'s own sequence type where that type allows it, else a list."""
    try:
        if isinstance(data, collections.abc.MutableSequence):
            clone = copy.copy(data)
            clone[:] = converted
            return clone
        return type(data)(converted)
    except TypeError:
        return converted


_UNSUPPORTED = {"timeout": 0, "worker_init_fn": None, "multiprocessing_context": None,
                "prefetch_factor": None, "persistent_workers": False}


def _check_options(batch_size: Any, shuffle: Any, sampler: Any, batch_sampler: Any,
                   drop_last: Any, num_workers: Any, options: dict[str, Any]) -> None:
    """PyTorch's argument rules, checked before the loader exists."""
    for name, default in _UNSUPPORTED.items():
        if options[name] != default:
            raise NotImplementedError(
                f"DataLoader: teachgrad does not support {name}={options[name]!r}: it loads "
                "batches in the calling process, without workers."
            )
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                         "disable multiprocessing.")
    if num_workers > 0:
        warnings.warn(f"DataLoader: teachgrad loads batches in the calling process; "
                      f"num_workers={num_workers} is ignored.", UserWarning, stacklevel=3)
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                   or batch_size <= 0):
        raise ValueError(
            f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
        )
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
        raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, "
                         "sampler, and drop_last")
    if batch_size is None and drop_last:
        raise ValueError("batch_size=None option disables auto-batching and is mutually "
                         "exclusive with drop_last")


class DataLoader:
    """Iterate over ``dataset`` in batches (PyTorch's arguments, in PyTorch's order).

    Args:
        dataset: any :class:`Dataset` (a :class:`TensorDataset` takes a fast path:
            one indexing per tensor per batch).
        batch_size: samples per batch; ``None`` yields single samples, uncollated.
        shuffle: a new random order every epoch (a :class:`RandomSampler`).
        sampler: your own order of indices (instead of ``shuffle``).
        batch_sampler: your own batches of indices (instead of the four above).
        collate_fn: turns a list of samples into a batch (default: :func:`default_collate`);
            with ``batch_size=None``, it is applied to each sample (default:
            :func:`default_convert`), as in PyTorch.
        drop_last: skip the last batch if it is smaller than ``batch_size``.
        generator: for the shuffling: a ``tg.Generator``, a numpy generator or an int
            seed; by default the global generator (see ``tg.manual_seed``).
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler | Iterable | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Any = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        _check_options(batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers, {
            "timeout": timeout, "worker_init_fn": worker_init_fn, "prefetch_factor": prefetch_factor,
            "multiprocessing_context": multiprocessing_context,
            "persistent_workers": persistent_workers})
        if sampler is None:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, bool(drop_last)
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory = num_workers, pin_memory
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self._default_collate = collate_fn is default_collate

    def __len__(self) -> int:
        """The number of batches per epoch (of samples, with ``batch_size=None``)."""
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is None:  # auto-batching off: one sample at a time
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            yield self._fetch(list(indices))

    def _fetch(self, indices: list[int]) -> Any:
        if self._default_collate and isinstance(self.dataset, TensorDataset):
            # the rows of every tensor at once: the same batch default_collate would stack
            index = np.asarray(indices, dtype=np.int64)
            return [t[tg.tensor(index, device=t.device)] for t in self.dataset.tensors]
        return self.collate_fn([self.dataset[i] for i in indices])
