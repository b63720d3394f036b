"""fnx: eager tensors with autograd, composable functional transforms and a kernel compiler."""
from ._version import __version__
from . import _heap
_heap.keep_large_blocks()   # glibc: large temporaries reuse freed heap blocks, no page faults per step
from . import core, debug, dtypes  # debug: FNX_DEBUG, read once, here
from .device import device, get_default_device, set_default_device
from .dtypes import (bfloat16, bool, can_cast, cdouble, cfloat, complex64, complex128, double, dtype, finfo, float,
                     float16, float32, float64,
                     get_default_dtype, half, iinfo, int, int8, int16, int32, int64, long, promote_types, result_type,
                     set_default_dtype, set_flush_denormal, short, uint8)
from .tensor import Size, Tensor, layout, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided
from .tensor import (detach, get_device, is_floating_point, is_nonzero, is_same_size, is_signed, is_storage, numel,
                     typename)
from . import autograd
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from .autograd.grad_mode import is_inference_mode_enabled
from .ops.creation import *  # noqa: F401,F403  (each ops module lists its public names in __all__)
from .ops.elementwise import *  # noqa: F401,F403
from .ops.inplace_functions import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.shape import *  # noqa: F401,F403
from .ops.joins import *  # noqa: F401,F403
from .ops.arrange import *  # noqa: F401,F403
from .ops.sort import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.scatters import *  # noqa: F401,F403
from .ops.calculus import *  # noqa: F401,F403
from .ops.statistics import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.sampling import *  # noqa: F401,F403
from .ops.special import *  # noqa: F401,F403
from .ops.strided import *  # noqa: F401,F403
from .ops.search import *  # noqa: F401,F403
from .ops.aten import *  # noqa: F401,F403
from .ops.segment import segment_reduce
from .ops.least_squares import frobenius_norm, nuclear_norm, pinverse
from .ops.spectral import legacy_qr as qr, legacy_svd as svd  # torch.svd and torch.qr (fnx.linalg's are newer)
from .ops.spectral import geqrf, householder_product as orgqr, ormqr, pca_lowrank, svd_lowrank
from .ops.complex import *  # noqa: F401,F403
from .ops.short_time_fourier import *  # noqa: F401,F403
from .ops.matrix_functions import matrix_exp
from .ops.lu import legacy_lu as lu, legacy_lu_solve as lu_solve, lu_unpack
from .ops.control import cond, fori_loop, scan, switch, while_loop
from . import fft, linalg
from . import _methods  # noqa: F401  (attaches ops to Tensor)
from . import sparse  # torch.sparse; sparse COO tensors
from .sparse import (dsmm, hspmm, smm, sparse_bsc_tensor, sparse_bsr_tensor, sparse_compressed_tensor,
                     sparse_coo_tensor, sparse_csc_tensor, sparse_csr_tensor, spmm)
from . import numpy  # jnp: the NumPy API with JAX's semantics
from . import cuda, random, tree, version
from .determinism import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,
                          is_deterministic_algorithms_warn_only_enabled, set_deterministic_debug_mode,
                          use_deterministic_algorithms)
from .ir import ClosedJaxpr, Jaxpr
from .transforms.ad import grad, hessian, jacfwd, jacrev, jvp, linearize, stop_gradient, value_and_grad, vjp
from .transforms.batching import vmap
from .transforms.compile import compile, jit
from . import compiler  # torch.compiler: is_compiling, disable, reset, ...
from .transforms.custom import checkpoint, custom_jvp, custom_vjp, remat
from .transforms.tracing import make_jaxpr
from . import nn  # after the ops it builds on
from .nn.torch_level import *  # noqa: F401,F403  (torch.conv2d, torch.dropout, ...: ATen's signatures)
from .nn.torch_native import *  # noqa: F401,F403  (torch.convolution, torch.native_layer_norm, torch.lstm, ...)
from . import distributed  # imports mpi4py only in init_process_group
from . import data, multiprocessing, optim, profiler, special, testing, utils
from . import return_types  # torch.return_types: the named-tuple types of ops
from .utils.dlpack import from_dlpack, to_dlpack  # torch.from_dlpack takes DLPack capsules too
from . import amp, cpu
from . import signal  # torch.signal.windows
from .amp import GradScaler, autocast, get_autocast_dtype, is_autocast_enabled
from .amp import (clear_autocast_cache, is_autocast_cache_enabled, set_autocast_cache_enabled, set_autocast_dtype,
                  set_autocast_enabled)
from .amp.legacy_paths import (get_autocast_cpu_dtype, get_autocast_gpu_dtype, is_autocast_cpu_enabled,
                               set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_gpu_dtype)
from ._warn import is_warn_always_enabled, set_warn_always
from . import quasirandom, rng  # torch.quasirandom, torch.random (fnx.random is JAX's); fnx.hub: imported on use
from .cuda import amp as _cuda_amp  # noqa: F401  (fnx.cuda.amp: PyTorch's deprecated torch.cuda.amp names)
from . import distributions
from . import func  # torch.func's names for the transforms
from . import lax, scipy, tree_util  # JAX's jax.lax, jax.scipy and jax.tree_util names
from .scipy.special import gammainc as igamma, gammaincc as igammac  # torch.igamma, torch.igammac
from .jax_api import ShapeDtypeStruct, block_until_ready, device_get, device_put, devices, eval_shape
from . import example_libraries
from .serialization import load, load_safetensors, save, save_safetensors
from . import export  # a callable module: fnx.export(f, *args) and fnx.export.load(path)
from . import onnx  # torch.onnx: export to an ONNX model (the onnx package is imported when exporting)
from math import e, inf, nan, pi
from . import accelerator, backends
from .backends import get_float32_matmul_precision, set_float32_matmul_precision
from .legacy_types import *  # noqa: F401,F403
from .tensor import (channels_last, channels_last_3d, contiguous_format, is_tensor, memory_format,
                     preserve_format, set_printoptions)
from .nn.functional import log_softmax, softmax
from .torch_alias import install_torch_alias
from .jax_alias import install_jax_alias
from .threads import (get_dynamic_threads, get_num_interop_threads, get_num_threads, set_dynamic_threads,
                      set_num_interop_threads, set_num_threads)
