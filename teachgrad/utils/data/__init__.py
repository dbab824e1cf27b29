"""``tg.utils.data``: datasets, loaders and samplers, spelt as in ``torch.utils.data``."""
from .distributed import DistributedSampler

__all__ = ["DistributedSampler"]
