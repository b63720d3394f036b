"""`torch.export` in PyTorch programs run on fnx: the torch alias maps `torch.export` to this module (and
`torch.export.dynamic_shapes`, `.graph_signature`, `.exported_program` to the modules these names come from).

`export(mod, args, kwargs=None, *, dynamic_shapes=None)` gives an `ExportedProgram` with PyTorch's surface
(`.module()`, `.graph_signature`, `.state_dict`, `.range_constraints`, ...), traced by fnx.export's tracer;
`save` / `load` write and read it in fnx's formats (JSON and `.npy`, never pickle). fnx's own exporter,
`fnx.export(f, *example_args)`, is unchanged: this is PyTorch's calling convention over it.
"""
from __future__ import annotations

from .torch_archive import load, save
from .torch_dims import Dim, ShapesCollection, dims
from .torch_program import (CallSpec, ExportedModule, ExportedProgram, GuardError, UnflattenedModule,
                            default_decompositions, register_dataclass, unflatten)
from .torch_tracing import ConstraintViolationError, DraftExportReport, draft_export, export
from .torch_signature import ExportGraphSignature

__all__ = ["export", "ExportedProgram", "ExportGraphSignature", "Dim", "dims", "ShapesCollection", "save", "load",
           "unflatten", "UnflattenedModule", "ExportedModule", "draft_export", "DraftExportReport",
           "default_decompositions", "register_dataclass", "CallSpec", "GuardError", "ConstraintViolationError"]
