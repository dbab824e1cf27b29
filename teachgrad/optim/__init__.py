"""``teachgrad.optim``: optimizers that update parameters from their gradients.

Each optimizer's file starts with its update rule written out; the code under it
follows the rule line by line. They match PyTorch's documented algorithms.
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
