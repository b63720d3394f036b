"""fnx.nn: PyTorch's module API (stateful modules, state_dict names) whose modules are also pytrees.

`import fnx.nn as nn` and `import fnx.nn.functional as F` stand in for torch.nn and torch.nn.functional.
"""
from . import attention, functional, init, initializers, modules, parallel, torch_level, utils
from .data_parallel import DataParallel
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers_all
from .module import Module, RemovableHandle
from .parameter import Buffer, Parameter, UninitializedParameter
from .stateless import functional_call
from .jax_functions import *  # noqa: F401,F403  (jax.nn's lowercase functions; no PyTorch name is shadowed)
from .jax_functions import __all__ as _jax_all
from ..tensor import Tensor

__all__ = ["functional", "init", "modules", "utils", "parallel", "attention", "Module", "RemovableHandle", "Parameter", "Buffer", "UninitializedParameter",
           "functional_call", "DataParallel", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", *_layers_all, "initializers", *_jax_all]

# PyTorch's Tensor.softmax / log_softmax / prelu / hardshrink: methods over the functional forms, attached here
# since the tensor layer sits below nn.
Tensor.softmax = functional.softmax
Tensor.log_softmax = functional.log_softmax
Tensor.prelu = functional.prelu
Tensor.hardshrink = functional.hardshrink
