"""The fnx.export archive: an exported program as JSON and `.npy` arrays in one zip file (docs/export.md).

`save` writes it atomically through fnx.serialization's helpers; `load` reads it back without running code
from it: JSON and `.npy` headers only (never pickle), every entry checked against the manifest, every
primitive looked up by name among fnx's own (`primitives.exportable`), every parameter decoded to a plain
value and checked, every variable defined before use, and each equation's shape rule run again at the
example sizes to compare with the stored shapes.
"""
from __future__ import annotations

import inspect
import json
import math
import os
import re
import struct
import zipfile
from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import dtypes as _dt
from .._version import __version__
from ..core import FnxTypeError, FnxValueError, Primitive, ShapedArray
from ..device import cpu
from ..ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, _Printer
from ..serialization.common import UnpicklingError, atomic_write, check_zip
from ..serialization.fnx_format import MAX_MANIFEST_BYTES, read_npy
from ..tensor import from_array
from ..tree import TreeDef, tree_structure
from .primitives import REFUSED, exportable
from .specialize import specialize
from .symbolic import SYMBOL, Dim, DimLiteral
from .tracing import sample_envs

__all__ = ["save", "read", "Contents", "FORMAT", "VERSION", "MAX_PROGRAM_BYTES", "encode_program", "encode_tree",
           "decode_tree"]

FORMAT, VERSION = "fnx.export", 1
MAX_PROGRAM_BYTES = 256 << 20
MAX_SIZE = 1 << 62   # a dimension's largest value (sizes are int64 in generated C)
_MANIFEST, _PROGRAM = "manifest.json", "program.json"
_CONST_NAME = re.compile(r"consts/(0|[1-9][0-9]*)\.npy")
_WHO = "fnx.export.load"


# ---------------------------------------------------------------- writing
def save(exported, path) -> None:
    """Write `exported` (an `Exported`) to `path` (a zip archive: manifest.json, program.json, consts/<k>.npy),
    atomically; `path` may also be a writable binary file."""
    arrays: list[np.ndarray] = []
    program = encode_program(exported.jaxpr, arrays)
    manifest = {
        "format": FORMAT, "version": VERSION, "fnx_version": __version__, "name": exported.name,
        "symbols": list(exported.symbols), "symbol_examples": dict(exported.symbol_examples),
        "arg_names": list(exported.arg_names),
        "in_tree": encode_tree(exported.in_tree, "the arguments"),
        "out_tree": encode_tree(exported.out_tree, "the result"),
        "in_avals": [_encode_aval(a) for a in exported.in_avals],
        "out_avals": [_encode_aval(a) for a in exported.out_avals],
        "consts": [{"data": f"consts/{k}.npy", "dtype": _stored_dtype(a), "shape": list(a.shape)}
                   for k, a in enumerate(arrays)],
    }
    texts = {_MANIFEST: _dumps(manifest), _PROGRAM: _dumps({"jaxpr": program})}

    def write(fh) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, text in texts.items():
                zf.writestr(name, text)
            for k, arr in enumerate(arrays):
                with zf.open(f"consts/{k}.npy", "w", force_zip64=True) as out:
                    np.save(out, arr.view(np.uint16) if arr.dtype == _bf16() else arr, allow_pickle=False)

    if isinstance(path, (str, os.PathLike)):
        atomic_write(path, write, _WHO)
    else:
        write(path)


def _dumps(obj) -> bytes:
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()


def _bf16():
    return _dt.bfloat16.np if _dt.bfloat16 is not None else None


def _stored_dtype(a: np.ndarray) -> str:
    return _dt.from_numpy_dtype(a.dtype).name


def encode_program(closed: ClosedJaxpr, arrays: list | None = None) -> dict:
    """The closed jaxpr in the archive's JSON form; its constants (at every depth) are appended to `arrays`.
    Raises FnxTypeError naming the primitive and parameter that the format cannot hold."""
    return _Encoder([] if arrays is None else arrays).closed(closed)


class _Encoder:
    def __init__(self, arrays: list):
        self.arrays = arrays
        self.ids: dict[int, int] = {}

    def closed(self, c: ClosedJaxpr) -> dict:
        out = self.jaxpr(c.jaxpr)
        out["consts"] = [self.const(a) for a in c.consts]
        return out

    def const(self, a) -> int:
        a = np.asarray(a)
        k = self.ids.get(id(a))
        if k is None:
            _dt.from_numpy_dtype(a.dtype)
            k = self.ids[id(a)] = len(self.arrays)
            self.arrays.append(a)
        return k

    def jaxpr(self, j: Jaxpr) -> dict:
        names = _Printer()   # names a, b, ..., z, ba, ... in order, as the jaxpr prints

        def binder(v: Var) -> dict:
            return {"name": names.name(v), **_encode_aval(v.aval)}

        def atom(a):
            if isinstance(a, DimLiteral):
                return {"literal_dim": str(a.dim), "reciprocal": a.reciprocal, "dtype": a.aval.dtype.name}
            if isinstance(a, Literal):
                return {"literal": _encode_number(a.val.item()), "dtype": a.aval.dtype.name}
            return names.name(a)

        out = {"constvars": [binder(v) for v in j.constvars], "invars": [binder(v) for v in j.invars], "eqns": []}
        for e in j.eqns:
            inputs = [atom(a) for a in e.inputs]
            params = {k: self.param(v, f"the parameter '{k}' of the primitive '{e.prim.name}'")
                      for k, v in sorted(e.params.items())}
            out["eqns"].append({"primitive": e.prim.name, "params": params, "inputs": inputs,
                                "outputs": [binder(v) for v in e.outvars]})
        out["outvars"] = [atom(a) for a in j.outvars]
        return out

    def param(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return {"float": _encode_number(v)}
        if isinstance(v, Dim):
            return {"dim": str(v)}
        if isinstance(v, _dt.dtype):
            return {"dtype": v.name}
        if isinstance(v, tuple):
            return [self.param(x, where) for x in v]
        if isinstance(v, ClosedJaxpr):
            return {"closed_jaxpr": self.closed(v)}
        if isinstance(v, Jaxpr):
            return {"jaxpr": self.jaxpr(v)}
        raise FnxTypeError(f"fnx.export: {where} is a {type(v).__name__}, which an exported program cannot hold "
                           f"(it holds None, bools, ints, floats, strings, tuples, dtypes, dimensions and jaxprs)")


def _encode_number(x):
    if isinstance(x, complex):   # [real, imaginary]
        return [_encode_number(x.real), _encode_number(x.imag)]
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)   # "nan", "inf", "-inf"
    return x


def _encode_aval(a: ShapedArray) -> dict:
    return {"dtype": a.dtype.name, "shape": [str(d) if isinstance(d, Dim) else int(d) for d in a.shape]}


def encode_tree(t: TreeDef, what: str):
    """A treedef as data: "*" for a leaf, {"tuple"|"list": [children]}, {"dict"|"odict": [[key, child], ...]},
    {"none": null}. A namedtuple is written as a tuple (a loaded program returns a plain tuple there)."""
    if t.kind is None:
        return "*"
    kinds = {tuple: "tuple", list: "list", dict: "dict", OrderedDict: "odict", type(None): "none"}
    kind = kinds.get(t.kind) or ("tuple" if issubclass(t.kind, tuple) and hasattr(t.kind, "_fields") else None)
    if kind is None:
        raise FnxTypeError(f"fnx.export: {what} hold a {t.kind.__name__}, which an archive cannot describe (it holds "
                           f"tuples, lists, dicts and None around tensors); pass plain containers")
    children = [encode_tree(c, what) for c in t.children]
    if kind in ("dict", "odict"):
        return {kind: [[k, c] for k, c in zip(t.aux, children)]}
    return {kind: None if kind == "none" else children}


# ---------------------------------------------------------------- reading
class Contents(NamedTuple):
    """What an archive holds: the arguments of `Exported`."""

    jaxpr: ClosedJaxpr
    in_tree: TreeDef
    out_tree: TreeDef
    symbols: tuple
    symbol_examples: dict
    arg_names: list
    name: str


def read(path) -> Contents:
    """Read an archive that `Exported.save` wrote (from a path or a readable, seekable binary file); never runs
    code from the file. Raises `UnpicklingError` (a RuntimeError) naming what is wrong with a damaged, foreign,
    newer or hostile file."""
    if not isinstance(path, (str, os.PathLike)):
        return _read(path)
    with open(path, "rb") as fh:
        return _read(fh)


def _read(fh) -> Contents:
    head = fh.read(4)
    fh.seek(0)
    if head != b"PK\x03\x04":
        raise UnpicklingError(f"{_WHO}: not an fnx.export archive (not a zip file)")
    try:
        with zipfile.ZipFile(fh) as zf:
            return _Reader(fh, zf).run()
    except zipfile.BadZipFile as e:
        raise UnpicklingError(f"{_WHO}: the file is damaged or truncated ({e})") from e
    except (EOFError, OSError, struct.error, zipfile.LargeZipFile, NotImplementedError) as e:
        raise UnpicklingError(f"{_WHO}: the file is damaged or truncated ({type(e).__name__}: {e})") from e
    except RecursionError as e:
        raise UnpicklingError(f"{_WHO}: the program nests too deeply") from e


def _fail(message: str) -> UnpicklingError:
    return UnpicklingError(f"{_WHO}: {message}")


class _Reader:
    def __init__(self, fh, zf: zipfile.ZipFile):
        self.fh, self.zf = fh, zf

    def run(self) -> Contents:
        infos = self.zf.infolist()
        check_zip(self.fh, infos, _WHO)
        names = {i.filename for i in infos}
        if _MANIFEST not in names or _PROGRAM not in names:
            raise _fail("not an fnx.export archive (no manifest.json and program.json)")
        strays = sorted(n for n in names - {_MANIFEST, _PROGRAM} if not _CONST_NAME.fullmatch(n))
        if strays:
            raise _fail(f"the archive holds unexpected entries {strays[:5]}")
        manifest = self.json(_MANIFEST, MAX_MANIFEST_BYTES)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise _fail(f"manifest.json does not describe an fnx.export archive (format is not {FORMAT!r})")
        version = manifest.get("version")
        if type(version) is not int:
            raise _fail(f"the archive's format version {version!r} is not an integer")
        if version > VERSION:
            raise _fail(f"the archive has format version {version}, written by a newer fnx "
                        f"({_short(manifest.get('fnx_version'))}); this fnx reads version {VERSION}: upgrade fnx")
        if version != VERSION:
            raise _fail(f"the archive has format version {version}, which this fnx does not read (it reads version "
                        f"{VERSION})")
        symbols = self.symbols(manifest)
        arrays = self.consts(_field(manifest, "consts", list))
        program = self.json(_PROGRAM, MAX_PROGRAM_BYTES)
        if not isinstance(program, dict) or not isinstance(program.get("jaxpr"), dict):
            raise _fail("program.json lacks its 'jaxpr' object")
        closed = _Decoder(arrays, set(symbols), exportable()).closed(program["jaxpr"], "the program")
        in_tree = decode_tree(manifest.get("in_tree"), "in_tree")
        out_tree = decode_tree(manifest.get("out_tree"), "out_tree")
        if in_tree.kind is not tuple:
            raise _fail("in_tree must describe the arguments' tuple")
        self.check_signature(manifest, closed, in_tree, out_tree, symbols)
        examples = _field(manifest, "symbol_examples", dict)
        arg_names = _field(manifest, "arg_names", list)
        if not all(isinstance(n, str) for n in arg_names):
            raise _fail("arg_names must be strings")
        name = manifest.get("name")
        _verify(closed, examples)
        return Contents(closed, in_tree, out_tree, tuple(symbols), examples, arg_names,
                        name if isinstance(name, str) else "f")

    def json(self, name: str, limit: int):
        info = self.zf.getinfo(name)
        if info.file_size > limit:
            raise _fail(f"{name} holds {info.file_size} bytes, more than the {limit} this fnx reads")
        try:
            return json.loads(self.zf.read(info).decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as e:
            raise _fail(f"{name} is not valid JSON ({e})") from e

    def symbols(self, manifest: dict) -> list[str]:
        symbols = _field(manifest, "symbols", list)
        examples = _field(manifest, "symbol_examples", dict)
        if not all(isinstance(s, str) and SYMBOL.fullmatch(s) for s in symbols) or len(set(symbols)) != len(symbols):
            raise _fail(f"malformed symbols {_short(symbols)} (distinct identifiers)")
        if set(examples) != set(symbols) or not all(type(v) is int and 1 <= v <= 1 << 31 for v in examples.values()):
            raise _fail(f"symbol_examples {_short(examples)} must give each symbol an example size from 1 to 2**31")
        return symbols

    def consts(self, entries: list) -> list[np.ndarray]:
        arrays = []
        for k, e in enumerate(entries):
            if not isinstance(e, dict) or e.get("data") != f"consts/{k}.npy":
                raise _fail(f"constant entry {k} is malformed (expected data 'consts/{k}.npy')")
            dtype = _dtype(e.get("dtype"), f"constant entry {k}")
            shape = e.get("shape")
            if not (isinstance(shape, list) and all(type(s) is int and 0 <= s <= MAX_SIZE for s in shape)):
                raise _fail(f"constant entry {k} has a malformed shape {_short(shape)}")
            try:
                info = self.zf.getinfo(e["data"])
            except KeyError:
                raise _fail(f"the constant {e['data']} is missing from the archive") from None
            stored = np.dtype(np.uint16) if dtype is _dt.bfloat16 else dtype.np
            arr = read_npy(self.zf, info, stored, tuple(shape), _WHO)
            arrays.append(arr.view(dtype.np) if dtype is _dt.bfloat16 else arr)
        return arrays

    def check_signature(self, manifest, closed: ClosedJaxpr, in_tree, out_tree, symbols) -> None:
        for key, vs, tree in (("in_avals", closed.jaxpr.invars, in_tree), ("out_avals", closed.jaxpr.outvars,
                                                                          out_tree)):
            avals = _field(manifest, key, list)
            got = [_encode_aval(v.aval) for v in vs]
            if avals != got:
                raise _fail(f"the manifest's {key} {_short(avals)} differ from the program's {_short(got)}")
            if tree.num_leaves != len(vs):
                raise _fail(f"the manifest's {key[:-6]}_tree has {tree.num_leaves} leaves for {len(vs)} values")
        for v in closed.jaxpr.invars:
            for d in v.aval.shape:
                if isinstance(d, Dim) and not d.is_symbol():
                    raise _fail(f"an input's dimension is {d}; an input's symbolic dimensions are bare symbols")
        used = {s for v in closed.jaxpr.invars for d in v.aval.shape if isinstance(d, Dim) for s in d.symbols}
        if used != set(symbols):
            raise _fail(f"the symbols {sorted(set(symbols) - used)} are no input's dimensions")


def _verify(closed: ClosedJaxpr, examples: dict) -> None:
    """Run every equation's shape rule at the example sizes and at the sizes export checked with; refuse a program
    whose stored shapes differ from what the rules give."""
    _, check = sample_envs(examples)
    for env in [dict(examples)] + [env for env in check if env != examples]:
        try:
            specialize(closed, env, cpu)
        except Exception as e:
            sizes = ", ".join(f"{k}={v}" for k, v in env.items())
            raise _fail(f"the program is inconsistent{' at ' + sizes if sizes else ''}: {e}") from e


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON (non-finite floats are written as {{\"float\": \"nan\"}})")


def _field(d: dict, key: str, kind: type):
    v = d.get(key)
    if not isinstance(v, kind):
        raise _fail(f"manifest.json lacks its {key!r} {kind.__name__}")
    return v


def _dtype(name, where: str) -> _dt.dtype:
    dtype = _dt._BY_NAME.get(name) if isinstance(name, str) else None
    if dtype is None or dtype.name != name:
        raise _fail(f"{where} has an unknown dtype {_short(name)}")
    return dtype


def _short(v, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def decode_tree(v, where: str) -> TreeDef:
    return tree_structure(_tree_value(v, where))


def _tree_value(v, where: str):
    """A pytree of the described structure with None... as leaves: rebuilt with plain containers."""
    if v == "*":
        return 0
    if isinstance(v, dict) and len(v) == 1:
        (kind, body), = v.items()
        if kind == "none" and body is None:
            return None
        if kind in ("tuple", "list") and isinstance(body, list):
            children = [_tree_value(c, where) for c in body]
            return tuple(children) if kind == "tuple" else children
        if kind in ("dict", "odict") and isinstance(body, list) and all(
                isinstance(i, list) and len(i) == 2 and isinstance(i[0], (str, int)) and not isinstance(i[0], bool)
                for i in body):
            out = (OrderedDict if kind == "odict" else dict)((i[0], _tree_value(i[1], where)) for i in body)
            if len(out) == len(body) and len({type(k) for k in out}) <= 1:
                return out
    raise _fail(f"malformed {where} {_short(v)}")


# ---------------------------------------------------------------- parameters
def _ints(v) -> bool:
    return isinstance(v, tuple) and all(_int(x) for x in v)


def _int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, Dim)


def _jaxprs(v) -> bool:
    return isinstance(v, tuple) and all(isinstance(x, ClosedJaxpr) for x in v)


# The types of the parameters fnx's primitives take, by name; a name not listed takes any value the format holds.
PARAM_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    **{k: ("an int", _int) for k in ("axis", "dim", "dim1", "dim2", "offset", "low", "high", "nd", "n_cc", "n_bc",
                                     "n_consts", "n_carry", "length", "num")},
    **{k: ("a bool", lambda v: isinstance(v, bool)) for k in ("keepdims", "reverse", "descending", "accumulate",
                                                               "overlap", "bias", "proj")},
    **{k: ("a tuple of ints", _ints) for k in ("shape", "axes", "perm", "dims", "starts", "stops", "steps", "lo",
                                               "hi", "interior", "kernel", "stride", "dilation")},
    "size": ("an int or a tuple of ints", lambda v: _int(v) or _ints(v)),
    **{k: ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)) for k in ("y", "lower",
                                                                                                      "upper")},
    "value": ("a number", lambda v: isinstance(v, (int, float))),
    "dtype": ("a dtype", lambda v: isinstance(v, _dt.dtype)),
    **{k: ("a string", lambda v: isinstance(v, str)) for k in ("kind", "mode", "equation")},
    "op": ("a string or None", lambda v: v is None or isinstance(v, str)),
    **{k: ("a closed jaxpr", lambda v: isinstance(v, ClosedJaxpr)) for k in ("jaxpr", "cond_jaxpr", "body_jaxpr")},
    "branches": ("a tuple of closed jaxprs", _jaxprs),
}


def _check_param_names(prim: Primitive, n_inputs: int, params: dict, where: str) -> None:
    """The inputs and params must bind to the primitive's rules (no unknown name, none missing)."""
    for rule, lead in ((prim.abstract, ()), (prim.impl, (None,))):
        try:
            sig = inspect.signature(rule)
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            continue
        try:
            sig.bind(*lead, *([None] * n_inputs), **params)
        except TypeError as e:
            raise _fail(f"{where} has {n_inputs} inputs and the parameters {sorted(params)}, which the primitive's "
                        f"rules do not take ({e})") from None


class _Decoder:
    """Builds jaxprs from their JSON form, checking every name, type and reference."""

    def __init__(self, arrays: list[np.ndarray], symbols: set, known: dict[str, Primitive]):
        self.arrays, self.symbols, self.known = arrays, symbols, known

    def closed(self, d, where: str) -> ClosedJaxpr:
        j = self.jaxpr(d, where)
        refs = d.get("consts")
        if not isinstance(refs, list) or len(refs) != len(j.constvars):
            raise _fail(f"{where} lists {_short(refs)} as constants for {len(j.constvars)} constvars")
        consts = []
        for k, (v, ref) in enumerate(zip(j.constvars, refs)):
            if type(ref) is not int or not 0 <= ref < len(self.arrays):
                raise _fail(f"{where}: constant {k} refers to {_short(ref)}, which is not a stored constant")
            arr = self.arrays[ref]
            want = (v.aval.dtype.name, v.aval.shape)
            if (_dt.from_numpy_dtype(arr.dtype).name, arr.shape) != want:
                raise _fail(f"{where}: constvar {k} is {v.aval.str_short()}, but constant {ref} holds "
                            f"{arr.dtype}{list(arr.shape)}")
            consts.append(arr)
        return ClosedJaxpr(j, consts)

    def jaxpr(self, d, where: str) -> Jaxpr:
        if not isinstance(d, dict):
            raise _fail(f"{where} is not a jaxpr object")
        scope: dict[str, Var] = {}

        def binders(items, what: str) -> list[Var]:
            if not isinstance(items, list):
                raise _fail(f"{what} must be a list")
            out = []
            for b in items:
                if not isinstance(b, dict) or not isinstance(b.get("name"), str):
                    raise _fail(f"{what} binds a malformed variable {_short(b)}")
                if b["name"] in scope:
                    raise _fail(f"{what} binds the variable {b['name']!r} a second time")
                v = scope[b["name"]] = Var(self.aval(b, what))
                out.append(v)
            return out

        def atom(a, what: str):
            if isinstance(a, str):
                if a not in scope:
                    raise _fail(f"{what} uses the variable {_short(a)}, which is not defined before it")
                return scope[a]
            return self.literal(a, what)

        constvars = binders(d.get("constvars"), f"{where}'s constvars")
        if where != "the program" and constvars and "consts" not in d:
            raise _fail(f"{where} has constvars but no constants")
        invars = binders(d.get("invars"), f"{where}'s invars")
        eqns_d = d.get("eqns")
        if not isinstance(eqns_d, list):
            raise _fail(f"{where} lacks its equations")
        eqns = []
        for i, e in enumerate(eqns_d):
            what = f"{where}, equation {i}"
            if not isinstance(e, dict) or not isinstance(e.get("primitive"), str):
                raise _fail(f"{what} is malformed")
            prim = self.primitive(e["primitive"], what)
            what = f"{what} ({prim.name})"
            inputs = e.get("inputs")
            params = e.get("params")
            if not isinstance(inputs, list) or not isinstance(params, dict):
                raise _fail(f"{what} lacks its inputs or params")
            ins = [atom(a, what) for a in inputs]
            decoded = {k: self.param(k, v, f"{what}: parameter '{k}'") for k, v in params.items()}
            _check_param_names(prim, len(ins), decoded, what)
            outs = binders(e.get("outputs"), what)
            if not prim.multiple_results and len(outs) != 1:
                raise _fail(f"{what} binds {len(outs)} outputs; the primitive has one")
            eqns.append(Eqn(prim, ins, decoded, outs))
        outvars_d = d.get("outvars")
        if not isinstance(outvars_d, list):
            raise _fail(f"{where} lacks its outvars")
        return Jaxpr(constvars, invars, eqns, [atom(a, f"{where}'s outputs") for a in outvars_d])

    def primitive(self, name: str, where: str) -> Primitive:
        prim = self.known.get(name)
        if prim is None:
            why = f": {REFUSED[name]}" if name in REFUSED else " (an archive from another fnx, or a damaged one)"
            raise _fail(f"{where} uses the primitive {_short(name)}, which this fnx does not load{why}")
        return prim

    def aval(self, b: dict, where: str) -> ShapedArray:
        dtype = _dtype(b.get("dtype"), where)
        shape = b.get("shape")
        if not isinstance(shape, list):
            raise _fail(f"{where} has a malformed shape {_short(shape)}")
        return ShapedArray(tuple(self.size(s, where) for s in shape), dtype, cpu)

    def size(self, s, where: str):
        if type(s) is int and 0 <= s <= MAX_SIZE:
            return s
        if isinstance(s, str):
            d = self.dim(s, where)
            if isinstance(d, Dim):
                return d
        raise _fail(f"{where} has a malformed dimension {_short(s)} (an int from 0 to 2**62, or a polynomial in the "
                    f"symbols)")

    def dim(self, text: str, where: str):
        try:
            d = Dim.parse(text)
        except FnxValueError as e:
            raise _fail(f"{where}: {e}") from None
        unknown = set(d.symbols) - self.symbols if isinstance(d, Dim) else set()
        if unknown:
            raise _fail(f"{where} uses the symbols {sorted(unknown)}, which the manifest does not declare")
        return d

    def _complex_literal(self, v, dtype: _dt.dtype, where: str) -> complex:
        """A complex literal, stored as [real, imaginary] (each a number, "nan", "inf" or "-inf")."""
        def part(x):
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                return float(x)
            if x in ("nan", "inf", "-inf"):
                return float(x)
            raise _fail(f"{where} has a literal {_short(v)} that is not a {dtype.name} value")

        if not isinstance(v, list) or len(v) != 2:
            raise _fail(f"{where} has a literal {_short(v)} that is not a {dtype.name} value")
        return complex(part(v[0]), part(v[1]))

    def literal(self, a, where: str) -> Literal:
        if not isinstance(a, dict):
            raise _fail(f"{where} has a malformed operand {_short(a)}")
        dtype = _dtype(a.get("dtype"), f"{where}'s literal")
        aval = ShapedArray((), dtype, cpu)
        if set(a) == {"literal_dim", "reciprocal", "dtype"} and isinstance(a["literal_dim"], str) and isinstance(
                a["reciprocal"], bool):
            d = self.dim(a["literal_dim"], where)
            if not isinstance(d, Dim):
                raise _fail(f"{where} has a dimension literal {_short(a['literal_dim'])} without symbols")
            return DimLiteral(d, a["reciprocal"], aval)
        if set(a) != {"literal", "dtype"}:
            raise _fail(f"{where} has a malformed literal {_short(a)}")
        v = a["literal"]
        if dtype.is_complex:
            return Literal(from_array(np.asarray(self._complex_literal(v, dtype, where), dtype=dtype.np)), aval)
        ok = (isinstance(v, bool) if dtype is _dt.bool else
              (isinstance(v, (int, float)) or v in ("nan", "inf", "-inf")) and not isinstance(v, bool)
              if dtype.is_floating_point else type(v) is int)
        try:
            value = np.asarray(float(v) if isinstance(v, str) else v, dtype=dtype.np) if ok else None
        except OverflowError:
            value = None
        if value is None or (not dtype.is_floating_point and value.item() != v):
            raise _fail(f"{where} has a literal {_short(v)} that is not a {dtype.name} value")
        return Literal(from_array(value), aval)

    def param(self, key: str, v, where: str):
        value = self.value(v, where)
        expected = PARAM_TYPES.get(key)
        if expected is not None and not expected[1](value):
            raise _fail(f"{where} is {_short(v)}, but it must be {expected[0]}")
        return value

    def value(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, list):
            return tuple(self.value(x, where) for x in v)
        if isinstance(v, dict) and len(v) == 1:
            (tag, body), = v.items()
            if tag == "float" and (isinstance(body, (int, float)) and not isinstance(body, bool) or
                                   body in ("nan", "inf", "-inf")):
                return float(body)
            if tag == "dim" and isinstance(body, str):
                return self.dim(body, where)
            if tag == "dtype":
                return _dtype(body, where)
            if tag == "closed_jaxpr":
                return self.closed(body, f"{where}'s jaxpr")
            if tag == "jaxpr":
                return self.jaxpr(body, f"{where}'s jaxpr")
        raise _fail(f"{where} has a malformed value {_short(v)}")
