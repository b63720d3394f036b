"""`torch.export.save` / `torch.export.load` on fnx: an ExportedProgram as one zip file that is never pickled.

The file holds `torch_export.json` (the graph signature, the user inputs' structure and constants, the symbolic
axes and their ranges, which buffers and inputs the program writes), `program.fnxp` (the program, an
fnx.export archive: docs/export.md), `state.fnx` (the state tensors and example inputs, in fnx.save's format)
and `extra/<name>` for each of `extra_files`. Loading checks the zip's layout, reads JSON and `.npy` only (the
inner archives are checked by their own readers) and validates the program against its signature. PyTorch's
own `.pt2` files (ATen graphs) are refused with an error saying so.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile

from ..core import FnxRuntimeError, FnxTypeError
from ..nn.parameter import Parameter
from ..serialization import fnx_format
from ..serialization.common import UnpicklingError, atomic_write, check_zip
from ..serialization.fnx_format import MAX_MANIFEST_BYTES
from . import archive
from .exported import Exported
from .torch_dims import ValueRanges
from .torch_program import TENSOR_INPUT, ExportedProgram, UserInputs
from .torch_signature import ConstantArgument, InputKind, InputSpec, OutputKind, TensorArgument

__all__ = ["save", "load", "FORMAT", "VERSION"]

FORMAT, VERSION = "fnx.torch_export", 1
_META, _PROGRAM, _STATE, _EXTRA = "torch_export.json", "program.fnxp", "state.fnx", "extra/"
_WHO = "torch.export.load"
_PYTORCH_ENTRIES = ("models/model.json", "archive_format", "serialized_exported_program.json", "data.pkl")


def save(ep: ExportedProgram, f, *, extra_files: dict | None = None, opset_version: dict | None = None,
         pickle_protocol: int = 2) -> None:
    """Write `ep` to `f` (a path, written atomically, or a writable binary file); `extra_files` maps names to
    strings stored alongside, which `load(extra_files=)` gives back."""
    if not isinstance(ep, ExportedProgram):
        raise FnxTypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got "
                           f"'{type(ep).__name__}' instead.")
    if opset_version:
        raise NotImplementedError("torch.export.save(opset_version=...): fnx programs have no operator sets")
    user = ep._user
    meta = {
        "format": FORMAT, "version": VERSION,
        "inputs": [_encode_spec(s) for s in ep.graph_signature.input_specs],
        "writes": [[s.kind.name, s.target] for s in ep.graph_signature.output_specs
                   if s.kind is not OutputKind.USER_OUTPUT],
        "in_tree": archive.encode_tree(user.tree, "the inputs"),
        "out_tree": archive.encode_tree(ep._out_tree, "the outputs"),
        "labels": list(user.labels), "arg_names": list(user.arg_names),
        "leaf_dims": [[[axis, name] for axis, name in d.items()] for d in user.leaf_dims],
        "ranges": {s: [r.lower, None if r.upper == math.inf else r.upper] for s, r in ep.range_constraints.items()},
        "requires_grad": {n: p.requires_grad for n, p in ep.named_parameters()},
    }
    program, state = io.BytesIO(), io.BytesIO()
    archive.save(ep._program, program)
    tensors = dict(zip([s.target for s in ep.graph_signature.input_specs if s.kind is not InputKind.USER_INPUT],
                       [t.detach() for t in ep._state_tensors()]))
    fnx_format.save({"state": tensors, "example_inputs": ep.example_inputs}, state)
    entries = {_META: json.dumps(meta, allow_nan=False).encode(), _PROGRAM: program.getvalue(),
               _STATE: state.getvalue()}
    for name, text in (extra_files or {}).items():
        entries[_EXTRA + name] = text.encode() if isinstance(text, str) else bytes(text)

    def write(fh) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, data in entries.items():
                zf.writestr(name, data)

    if isinstance(f, (str, os.PathLike)):
        atomic_write(f, write, "torch.export.save")
    else:
        write(f)


def _encode_spec(s: InputSpec) -> dict:
    out = {"kind": s.kind.name, "name": s.arg.name, "target": s.target, "persistent": s.persistent}
    if isinstance(s.arg, ConstantArgument):
        if not isinstance(s.arg.value, (bool, int, float, str)):
            raise FnxTypeError(f"torch.export.save: the input {s.arg.name} was exported as the constant "
                               f"{s.arg.value!r}, which the archive cannot hold (ints, floats, bools, strings)")
        out["value"] = s.arg.value
    return out


def load(f, *, extra_files: dict | None = None, expected_opset_version: dict | None = None) -> ExportedProgram:
    """The ExportedProgram that `save` wrote to `f` (a path or a readable binary file). Nothing in the file is
    run; a damaged, foreign or hostile file raises `UnpicklingError` (a RuntimeError) saying why. Entries of
    `extra_files` named in the file are filled in with the stored strings."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, extra_files)
    return _load(f, extra_files)


def _fail(message: str) -> UnpicklingError:
    return UnpicklingError(f"{_WHO}: {message}")


def _load(fh, extra_files: dict | None) -> ExportedProgram:
    if fh.read(4) != b"PK\x03\x04":
        raise _fail("not a file that torch.export.save wrote (not a zip archive)")
    fh.seek(0)
    try:
        with zipfile.ZipFile(fh) as zf:
            infos = zf.infolist()
            check_zip(fh, infos, _WHO)
            names = {i.filename for i in infos}
            if _META not in names:
                if any(n.endswith(_PYTORCH_ENTRIES) for n in names):
                    raise _fail("this is a .pt2 archive written by PyTorch's torch.export.save; fnx cannot load "
                                "PyTorch's programs (graphs of ATen operators). Export the model again under fnx "
                                "(torch.export.export in a program run with `python -m fnx run`) and save that")
                raise _fail(f"not a file that torch.export.save wrote under fnx (no {_META})")
            strays = sorted(n for n in names - {_META, _PROGRAM, _STATE} if not n.startswith(_EXTRA))
            if strays or _PROGRAM not in names or _STATE not in names:
                raise _fail(f"the archive's entries {sorted(names)[:8]} are not those torch.export.save writes")
            if zf.getinfo(_META).file_size > MAX_MANIFEST_BYTES:
                raise _fail(f"{_META} is larger than {MAX_MANIFEST_BYTES} bytes")
            meta = json.loads(zf.read(_META))
            program = Exported(*archive.read(io.BytesIO(zf.read(_PROGRAM))))
            stored = fnx_format.load(io.BytesIO(zf.read(_STATE)))
            for name in extra_files or {}:
                if _EXTRA + name in names:
                    extra_files[name] = zf.read(_EXTRA + name).decode()
    except (zipfile.BadZipFile, EOFError, OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _fail(f"the file is damaged or truncated ({type(e).__name__}: {e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _fail(f"{_META} does not describe a torch.export archive of fnx (format is not {FORMAT!r})")
    if meta.get("version") != VERSION:
        raise _fail(f"the archive's version {meta.get('version')!r} is not {VERSION}, the one this fnx reads")
    try:
        ep = _rebuild(meta, program, stored)
        ep.validate()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, FnxRuntimeError) as e:
        raise _fail(f"{_META} does not match the program ({type(e).__name__}: {e})") from e
    return ep


def _rebuild(meta: dict, program: Exported, stored: dict) -> ExportedProgram:
    state, requires_grad = stored["state"], meta["requires_grad"]
    specs, state_dict, constants, user_constants = [], {}, {}, []
    for d in meta["inputs"]:
        kind = InputKind[d["kind"]]
        arg = ConstantArgument(d["name"], d["value"]) if "value" in d else TensorArgument(str(d["name"]))
        specs.append(InputSpec(kind, arg, d["target"], d["persistent"]))
        if kind is InputKind.USER_INPUT:
            user_constants.append(arg.value if isinstance(arg, ConstantArgument) else TENSOR_INPUT)
            continue
        t = state[d["target"]]
        if kind is InputKind.PARAMETER:
            state_dict[d["target"]] = Parameter(t, requires_grad=bool(requires_grad[d["target"]]))
        elif kind is InputKind.BUFFER and d["persistent"]:
            state_dict[d["target"]] = t
        else:
            constants[d["target"]] = t
    leaf_dims = [{int(axis): str(name) for axis, name in pairs} for pairs in meta["leaf_dims"]]
    user = UserInputs(archive.decode_tree(meta["in_tree"], "the inputs"), [str(x) for x in meta["labels"]],
                      user_constants, leaf_dims, [str(x) for x in meta["arg_names"]])
    if len(user.labels) != len(user_constants) or len(leaf_dims) != len(user_constants):
        raise ValueError("the user inputs' labels, constants and axes differ in number")
    ranges = {str(s): ValueRanges(int(lo), math.inf if hi is None else int(hi)) for s, (lo, hi) in
              meta["ranges"].items()}
    examples = stored.get("example_inputs")
    writes = [(OutputKind[kind], str(target)) for kind, target in meta["writes"]]
    return ExportedProgram(program, specs, writes, state_dict, constants, user,
                           archive.decode_tree(meta["out_tree"], "the outputs"), ranges,
                           tuple(examples) if examples is not None else None)
