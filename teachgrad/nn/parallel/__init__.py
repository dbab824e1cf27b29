"""``tg.nn.parallel``: wrappers that train one model on several processes."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
