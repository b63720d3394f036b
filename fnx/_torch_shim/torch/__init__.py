"""`torch` in a process started afresh by a program that runs with fnx standing in for torch.

`install_torch_alias()` puts this package's folder first on sys.path, and processes started with spawn or
forkserver (DataLoader workers, multiprocessing pools) copy the parent's sys.path before they re-import the main
script. Their first `import torch` finds this package, which installs the alias in that process too and hands
over to it, so the script's `import torch` gives fnx there as well instead of loading real PyTorch.
"""
import sys

from fnx.torch_alias import install_torch_alias

del sys.modules[__name__]  # this package stands in for nothing: the alias answers `torch` from here on
install_torch_alias()
sys.modules[__name__] = __import__(__name__)
