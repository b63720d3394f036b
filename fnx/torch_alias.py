"""fnx standing in for `torch`: unmodified PyTorch programs import fnx when they import torch.

`install_torch_alias()` puts a finder first on `sys.meta_path` that answers `import torch` and every
`import torch.X.Y` with the fnx module of the same path (`torch.nn.functional` is `fnx.nn.functional`,
`torch.utils.data` is `fnx.utils.data`, ...), so no later import can load real PyTorch next to fnx. Each
`torch...` module is a thin alias object: reads and writes go to the fnx module it stands for (so
`torch.backends.cudnn.benchmark = True` sets fnx's flag), and a name fnx lacks raises an AttributeError or
ImportError that says fnx stands in for torch and what to do. fnx's own modules are not changed: `import fnx`
behaves the same with or without the alias. Processes started afresh from an aliased one (spawn, forkserver)
get the alias through fnx/_torch_shim. `python -m fnx run SCRIPT` installs it and runs the script. The
machinery is fnx/_alias.py's, shared with the jax alias.
"""
from __future__ import annotations

import os

from ._alias import Alias

__all__ = ["install_torch_alias", "run_script"]

# torch.distributions.X modules whose classes live in an fnx module of another name
_DISTRIBUTIONS = {f"torch.distributions.{name}": f"fnx.distributions.{module}" for module, names in (
    ("counts", "binomial geometric poisson negative_binomial multinomial"),
    ("location_scale", "cauchy exponential gumbel laplace generalized_pareto"),
    ("student_t", "chi2 studentT fishersnedecor"),
    ("pushed_forward", "half_normal log_normal half_cauchy weibull pareto inverse_gamma kumaraswamy logistic_normal"),
    ("relaxed", "one_hot_categorical relaxed_bernoulli relaxed_categorical")) for name in names.split()}

_TORCH = Alias(
    "torch", "PyTorch",
    renamed={"torch.optim.adamw": "fnx.optim.adam", "torch.nn.utils.clip_grad": "fnx.nn.utils",
             "torch.nn.utils.convert_parameters": "fnx.nn.utils", "torch.optim.adadelta": "fnx.optim.adagrad",
             "torch.optim.adamax": "fnx.optim.adam_variants", "torch.optim.nadam": "fnx.optim.adam_variants",
             "torch.optim.radam": "fnx.optim.adam_variants",
             "torch.nn.parallel.data_parallel": "fnx.nn.data_parallel",
             "torch.autograd.functional": "fnx.autograd_functional",
             "torch.autograd.forward_ad": "fnx.transforms.forward_ad", "torch.jit": "fnx.torchscript",
             "torch.autograd.profiler": "fnx.profiler", "torch.random": "fnx.rng", **_DISTRIBUTIONS},
    help="use what fnx offers instead (README 'Porting from PyTorch' lists the differences), or run the program "
         "with real PyTorch (plain `python`, without `-m fnx run` / fnx.install_torch_alias())",
    shim=os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_shim"),
    install_name="install_torch_alias", run_command="python -m fnx run SCRIPT")


def install_torch_alias() -> None:
    """Make `import torch` and every `import torch.X.Y` in this process give fnx (notebooks: call it first).

    Refuses with an error when real PyTorch is already imported, since the program would then mix the two;
    calling it again does nothing. `python -m fnx run SCRIPT` calls it for you.
    """
    _TORCH.install()


def run_script(path: str, args: list[str]) -> None:
    """Run the Python file `path` as `__main__` with `sys.argv = [path, *args]` and fnx standing in for torch,
    as `python path args...` runs it under PyTorch (its directory first on sys.path)."""
    _TORCH.run_script(path, args)
