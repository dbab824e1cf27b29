"""``tg.nn.parallel``: wrappers that train one model on several processes."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
