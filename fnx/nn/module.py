"""`nn.Module`: PyTorch's stateful module API, and modules as pytrees of their parameters and buffers.

Assigning a Parameter, a buffer or a Module to an attribute registers it (as in PyTorch), which gives
`named_parameters`, `state_dict` and friends their PyTorch names. Every Module subclass is also a pytree
node (Equinox style): its leaves are its parameters (in `named_parameters` order) then its floating-point
buffers, and unflattening builds a shallow copy of the module tree holding the new leaves (fnx/nn/pytree.py).
So `fnx.grad(loss)(model, x, y)` returns a module-shaped gradient and `vmap`/`jvp`/`compile` accept models.
"""
from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable, Iterator

from .._graph import preorder
from .. import dtypes as _dt
from .. import tree
from ..autograd import no_grad
from ..core import FnxRuntimeError, FnxTypeError
from ..tensor import Tensor, parse_to
from ..transforms import compile as _compile
from .backward_hooks import call_with_backward_hooks
from .parameter import Buffer, Parameter
from .pytree import flatten_module, unflatten_module

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict` returns: the keys it could not match."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by the `register_*_hook` methods: `handle.remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = weakref.ref(hooks)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _addindent(s: str, spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join((" " * spaces + line) if line.strip() else "" for line in lines[1:])


def _typename(v) -> str:
    return "fnx.Tensor" if isinstance(v, Tensor) else type(v).__name__


class Module:
    """Base class of all neural-network modules (torch.nn.Module semantics)."""

    training: bool
    _version: int = 1
    call_super_init: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if (args or kwargs) and not self.call_super_init:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}")
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", {})
        set_(self, "_buffers", {})
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_modules", {})
        set_(self, "_forward_hooks", OrderedDict())
        set_(self, "_forward_pre_hooks", OrderedDict())

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        tree.register_pytree_node(cls, flatten_module, unflatten_module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ calling
    _backward_hooks: Mapping = MappingProxyType({})  # made per module by the first register_*backward*_hook
    _backward_pre_hooks: Mapping = MappingProxyType({})

    def __call__(self, *args, **kwargs):
        if self._backward_hooks or self._backward_pre_hooks:
            return call_with_backward_hooks(self, args, lambda *a: self._call_with_hooks(a, kwargs))
        if not (self._forward_hooks or self._forward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        for hook, with_kwargs, _ in list(self._forward_pre_hooks.values()):
            if with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise FnxRuntimeError(f"forward pre-hook must return None or a tuple of (new_args, "
                                              f"new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        called = set()
        result = None
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, (hook, with_kwargs, _) in list(self._forward_hooks.items()):
                called.add(hook_id)
                res = hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
                if res is not None:
                    result = res
            return result
        except Exception:
            for hook_id, (hook, with_kwargs, always_call) in list(self._forward_hooks.items()):
                if always_call and hook_id not in called:
                    hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
            raise

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """`hook(module, args)` (or `(module, args, kwargs)`) runs before forward and may replace the inputs."""
        return self._add_hook(self._forward_pre_hooks, (hook, with_kwargs, False), prepend)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """`hook(module, args, output)` (or `(module, args, kwargs, output)`) runs after forward and may
        replace the output."""
        return self._add_hook(self._forward_hooks, (hook, with_kwargs, always_call), prepend)

    @staticmethod
    def _add_hook(hooks: OrderedDict, entry: tuple, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = entry
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_input, grad_output)` runs in backward once the gradients w.r.t. the module's
        positional inputs are known (tuples; None for non-tensors) and may return a replacement grad_input."""
        return self._add_hook(self._own_hooks("_backward_hooks"), hook, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """`hook(module, grad_output)` runs in backward when the gradients w.r.t. the module's outputs are known,
        before any are propagated into it, and may return a replacement grad_output."""
        return self._add_hook(self._own_hooks("_backward_pre_hooks"), hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's deprecated form; here the same as `register_full_backward_hook`."""
        return self.register_full_backward_hook(hook)

    def _own_hooks(self, name: str) -> OrderedDict:
        if name not in self.__dict__:
            object.__setattr__(self, name, OrderedDict())
        return self.__dict__[name]

    # ------------------------------------------------------------------ attribute registration
    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            members = d.get(store)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' (fnx.nn.Parameter or "
                                f"None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            d["_modules"][name] = value
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' (fnx.nn.Module or "
                                f"None expected)")
            d["_modules"][name] = None
        elif isinstance(value, Buffer):
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
        elif name in d.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' (fnx.Tensor or None "
                                f"expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Remove `name` from every place an attribute can live but `keep`, the store it is about to be set in
        (so a replaced parameter, buffer or child keeps its place in the order, as in PyTorch)."""
        d = self.__dict__
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                d[store].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d[store]:
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_member_name(self, name, kind: str, store: str) -> None:
        if store not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self.__dict__[store]:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (running statistics); persistent ones are saved."""
        self._check_member_name(name, "buffer", "_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' (fnx.Tensor or None "
                            f"required)")
        if isinstance(tensor, Buffer):
            tensor = tensor.detach()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None, to declare an optional one that is absent)."""
        self._check_member_name(name, "parameter", "_parameters")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                                f"(fnx.nn.Parameter or None required)")
            if param.grad_fn is not None:
                raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                                 f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                                 f"the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module, reachable as an attribute of `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path `target` ("" is self)."""
        mod = self
        for item in target.split(".") if target else ():
            sub = mod._modules.get(item) if isinstance(mod, Module) else None
            if sub is None:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = sub
        return mod

    def _get_member(self, target: str, store: str, kind: str):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod.__dict__[store]:
            raise AttributeError(f"{mod._get_name()} has no {kind} `{name}`")
        return mod.__dict__[store][name]

    def get_parameter(self, target: str) -> Parameter:
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        return self._get_member(target, "_buffers", "buffer")

    def get_extra_state(self) -> Any:
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    # ------------------------------------------------------------------ iteration
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        return iter(self._unique_modules())

    def _unique_modules(self) -> list[Module]:
        """What `named_modules()` visits, without building the names: self and its submodules, depth first in
        registration order, each once (a training loop calls `parameters()` every step)."""
        return preorder([self], lambda module: [m for m in module._modules.values() if m is not None])

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in mod.__dict__[store].items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs; a parameter shared by several modules is listed once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        seen = set()
        for module in self._unique_modules() if recurse else (self,):
            for p in module.__dict__["_parameters"].values():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ state dict
    def state_dict(self, *, destination: dict | None = None, prefix: str = "", keep_vars: bool = False) -> dict:
        """Parameters and persistent buffers by dotted name (PyTorch's keys), detached unless keep_vars."""
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def load_state_dict(self, state_dict: Mapping, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy tensors from `state_dict` into this module's parameters and buffers (under no_grad).

        With `strict`, missing and unexpected keys raise; shape mismatches always raise. Returns
        (missing_keys, unexpected_keys). With `assign`, the module takes the given tensors instead of copying.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module: Module, local: dict, prefix: str) -> None:
            meta = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            meta["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local, prefix, meta, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(child_prefix)}, child_prefix)

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise FnxRuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """Load this module's own entries (not its children's); PyTorch's signature, for overrides."""
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                       if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected fnx.Tensor or Tensor-like '
                                  f'object from checkpoint but received {type(value)}')
                continue
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            value = Parameter(value, requires_grad=param.requires_grad)
                        setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f'{param.shape} and whose dimensions in the checkpoint are {value.shape}, an '
                                  f'exception occurred : {ex.args}.')
        extra_key = prefix + "_extra_state"
        if self._has_extra_state():
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix):].split(".", 1)
                    if (head[0] not in self._modules) if len(head) > 1 else (head[0] not in local_state):
                        unexpected_keys.append(key)

    # ------------------------------------------------------------------ modes and conversion
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad.detach() if p.grad.grad_fn is not None else p.grad
                g.requires_grad_(False)
                p.grad = g.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call `fn` on every submodule (children first) and then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's data (keeping the Parameter objects), grad and buffer by `fn` of it."""
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        p.grad.data = g
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        """`to(device)`, `to(dtype)`, `to(device, dtype)`, `to(tensor)`: moves all state, casts floating and
        complex state. `memory_format=` is checked and leaves the state row-major, where PyTorch lays out the 4-D
        and 5-D state as it names: a convolution's output takes its input's layout either way, and fnx's fused
        optimizers run over row-major parameters."""
        dev, dt, _, _ = parse_to("nn.Module.to()", args, kwargs, allow_copy=False)
        if dt is not None and not dt.is_inexact:
            raise FnxTypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                               f"dtype={dt}")

        def convert(t: Tensor) -> Tensor:
            return t.to(device=dev, dtype=dt if t.dtype.is_inexact else None)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.to(dst_type))

    def _cast_floating(self, dt) -> Module:
        return self._apply(lambda t: t.to(dt) if t.is_floating_point() else t)

    def float(self) -> Module:
        return self._cast_floating(_dt.float32)

    def double(self) -> Module:
        return self._cast_floating(_dt.float64)

    def half(self) -> Module:
        return self._cast_floating(_dt.float16)

    def bfloat16(self) -> Module:
        return self._cast_floating(_dt.bfloat16)

    def share_memory(self) -> Module:
        """Move every parameter and buffer into shared memory (Tensor.share_memory_): processes forked afterwards
        train the same weights (Hogwild)."""
        for t in [*self.parameters(), *self.buffers()]:
            t.share_memory_()
        return self

    # ------------------------------------------------------------------ repr
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own settings for its repr (override in subclasses)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(m), 2) for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


tree.register_pytree_node(Module, flatten_module, unflatten_module)


def _buffer_slots(tree_) -> list[tuple[dict, str]]:
    """(buffer dict, name) of every buffer of the modules in a pytree, in named_modules order: where fnx.compile
    reads the module state a compiled call uses and writes back what it updates."""
    slots = []
    for m in tree.tree_leaves(tree_, is_leaf=lambda x: isinstance(x, Module)):
        if isinstance(m, Module):
            for _, sub in m.named_modules():
                slots += [(sub._buffers, name) for name, b in sub._buffers.items() if b is not None]
    return slots


_compile.buffer_slots_hook = _buffer_slots
