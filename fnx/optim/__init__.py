"""fnx.optim: stateful optimizers with PyTorch's API, their learning-rate schedulers, and functional forms.

`fnx.optim.SGD(model.parameters(), lr=0.1)` works like torch.optim.SGD; `fnx.optim.functional.sgd(lr=0.1)`
is the same update as pure `init`/`update` functions over pytrees.
"""
from . import functional, lr_scheduler, swa_utils
from .adafactor import Adafactor
from .adagrad import Adadelta, Adagrad
from .adam import Adam, AdamW
from .adam_variants import Adamax, NAdam, RAdam
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop",
           "ASGD", "LBFGS", "Adafactor", "Muon", "SparseAdam", "lr_scheduler", "functional", "swa_utils"]
