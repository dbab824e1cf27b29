"""``tg.utils.data``: datasets, samplers and the ``DataLoader``, as ``torch.utils.data``.

* ``dataset.py``: :class:`Dataset`, :class:`TensorDataset`, :class:`Subset`, :func:`random_split`;
* ``sampler.py``: :class:`Sampler`, :class:`SequentialSampler`, :class:`RandomSampler`,
  :class:`SubsetRandomSampler`, :class:`WeightedRandomSampler`, :class:`BatchSampler`;
* ``dataloader.py``: :class:`DataLoader`, :func:`default_collate` and :func:`default_convert`;
* ``distributed.py``: :class:`DistributedSampler`, one shard of a dataset per rank.

(``tg.data`` adds synthetic data sets, ``make_moons`` and friends, and re-exports these.)
"""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import Dataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler
from .sampler import WeightedRandomSampler

__all__ = [
    "Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate", "default_convert",
    "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler",
    "DistributedSampler", "WeightedRandomSampler",
]
