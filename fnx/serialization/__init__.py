"""`fnx.save` / `fnx.load` and the checkpoint formats they read and write, none of which runs code when loaded.

- fnx's own format (fnx_format.py): a zip of a JSON manifest and `.npy` arrays, for anything `fnx.save` takes.
- PyTorch's `torch.save` zip files, `.pt`/`.pth`/`.bin` (torch_format.py): read through a restricted unpickler
  that rebuilds only tensors, storages and plain containers, as `torch.load(weights_only=True)` does.
- safetensors files (safetensors_format.py): Hugging Face's weights format, read and written.
- Classes the caller trusts (`add_safe_globals`, `safe_globals`) may also be rebuilt (common.py).
"""
from .common import (UnpicklingError, add_safe_globals, clear_safe_globals, get_safe_globals,
                     safe_globals)
from .fnx_format import FORMAT, MAX_MANIFEST_BYTES, VERSION, load, save
from .safetensors_format import load_safetensors, save_safetensors

__all__ = ["save", "load", "UnpicklingError", "FORMAT", "VERSION", "MAX_MANIFEST_BYTES", "add_safe_globals",
           "get_safe_globals", "clear_safe_globals", "safe_globals", "save_safetensors", "load_safetensors"]
