"""PyTorch names that real scripts use and that are not ops of the table: Tensor.new_*, type_as, metadata
queries, legacy tensor types, memory formats, backend flags and the accelerator queries."""
import math

import numpy as np
import pytest

import fnx


def test_new_constructors_follow_self_dtype_and_device_unless_given():
    x = fnx.ones(2, dtype=fnx.float64)
    assert x.new_zeros(2, 3).dtype is fnx.float64 and x.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones(4).tolist() == [1.0] * 4
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_full((2,), 7).dtype is fnx.float64
    assert x.new_empty(3, dtype=fnx.int32).dtype is fnx.int32
    t = x.new_tensor([1, 2])
    assert t.dtype is fnx.float64 and t.tolist() == [1.0, 2.0]
    assert x.new_zeros(2, requires_grad=True).requires_grad
    # the legacy Tensor.new: sizes (ints or a Size) make a shape, one sequence gives values, nothing an empty tensor
    assert x.new(2, 3).shape == (2, 3) and x.new(fnx.Size([4])).shape == (4,) and x.new().shape == (0,)
    assert x.new((2, 3)).tolist() == [2.0, 3.0] and x.new([1, 2]).dtype is fnx.float64


def test_type_as_converts_to_the_other_dtype():
    x = fnx.tensor([1.5, 2.5])
    assert x.type_as(fnx.zeros(1, dtype=fnx.int64)).tolist() == [1, 2]
    assert x.type_as(fnx.zeros(1)) is x
    with pytest.raises(TypeError, match="type_as"):
        x.type_as(np.zeros(1))


def test_metadata_queries():
    x = fnx.zeros(2, 3)
    assert x.ndimension() == 2 and not x.is_sparse and x.get_device() == -1
    assert fnx.is_tensor(x) and not fnx.is_tensor(np.zeros(1))
    assert (fnx.pi, fnx.e, fnx.inf) == (math.pi, math.e, math.inf) and math.isnan(fnx.nan)


def test_t_transposes_matrices_and_refuses_more_dims():
    x = fnx.arange(6.0).reshape(2, 3)
    assert x.t().shape == (3, 2) and x.t().tolist() == np.arange(6.0).reshape(2, 3).T.tolist()
    assert fnx.t(fnx.ones(3)).shape == (3,)
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"):
        fnx.ones(2, 2, 2).t()


def test_addcmul_addcdiv_in_place_as_optimizers_write_them():
    p, g = fnx.ones(3), fnx.tensor([1.0, 2.0, 4.0])
    p.addcmul_(g, g, value=-0.5)
    assert p.tolist() == [0.5, -1.0, -7.0]
    p.addcdiv_(g, fnx.full((3,), 2.0), value=2)
    assert p.tolist() == [1.5, 1.0, -3.0]
    with pytest.raises(RuntimeError, match="integer division with addcdiv"):
        fnx.addcdiv(p, fnx.ones(3, dtype=fnx.int64), fnx.ones(3, dtype=fnx.int64))


def test_softmax_methods_match_the_functional_forms():
    x = fnx.randn(3, 5)
    np.testing.assert_allclose(x.softmax(-1).numpy(), fnx.nn.functional.softmax(x, dim=-1).numpy())
    np.testing.assert_allclose(fnx.log_softmax(x, 0).numpy(), x.log_softmax(dim=0).numpy())


def test_legacy_types_construct_and_check_instances():
    assert fnx.FloatTensor([1, 2]).dtype is fnx.float32 and fnx.LongTensor(2, 3).shape == (2, 3)
    assert fnx.LongTensor([1]).dtype is fnx.int64 and fnx.BoolTensor([1, 0]).tolist() == [True, False]
    assert fnx.FloatTensor().shape == (0,)
    assert isinstance(fnx.zeros(2), fnx.FloatTensor) and not isinstance(fnx.zeros(2), fnx.DoubleTensor)
    assert not isinstance(np.zeros(2, np.float32), fnx.FloatTensor)


def test_memory_formats_are_accepted_and_checked():
    x = fnx.randn(1, 2, 3, 3)
    assert x.to(memory_format=fnx.channels_last).tolist() == x.tolist()
    assert x.contiguous(memory_format=fnx.contiguous_format) is x
    assert fnx.nn.Conv2d(2, 2, 1).to(memory_format=fnx.channels_last) is not None
    with pytest.raises(TypeError, match="memory_format must be fnx.contiguous_format"):
        x.to(memory_format="channels_last")


def test_backend_flags_are_settable_and_linked():
    import fnx.backends.cudnn as cudnn

    old = fnx.get_float32_matmul_precision()
    try:
        fnx.set_float32_matmul_precision("high")
        assert fnx.backends.cuda.matmul.allow_tf32 and fnx.get_float32_matmul_precision() == "high"
        fnx.backends.cuda.matmul.allow_tf32 = False
        assert fnx.get_float32_matmul_precision() == "highest"
        with pytest.raises(ValueError, match="expected one of"):
            fnx.set_float32_matmul_precision("fast")
        with pytest.raises(AttributeError, match="no flag 'allow_tf16'"):
            fnx.backends.cuda.matmul.allow_tf16 = True
    finally:
        fnx.set_float32_matmul_precision(old)
    cudnn.benchmark = True
    assert fnx.backends.cudnn.benchmark and not cudnn.is_available()
    cudnn.benchmark = False
    assert not fnx.backends.mps.is_available()
    assert fnx.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")


def test_accelerator_queries_agree_with_cuda():
    assert fnx.accelerator.is_available() == fnx.cuda.is_available()
    assert fnx.accelerator.device_count() == fnx.cuda.device_count()
    expected = fnx.device("cuda") if fnx.cuda.is_available() else None
    assert fnx.accelerator.current_accelerator() == expected


def test_torch_module_paths_are_fnx_modules():
    import fnx.nn.modules.batchnorm as batchnorm
    import fnx.utils.data as tud
    from fnx.nn.modules.module import Module
    from fnx.utils.data.dataloader import DataLoader

    assert tud is fnx.data and DataLoader is fnx.data.DataLoader and Module is fnx.nn.Module
    assert issubclass(fnx.nn.BatchNorm2d, batchnorm._BatchNorm)
    assert fnx.nn.modules.Linear is fnx.nn.Linear and fnx.nn.modules.sparse.Embedding is fnx.nn.Embedding


def test_cuda_seeding_leaves_the_cpu_stream_alone():
    fnx.manual_seed(5)
    expected = fnx.randn(4).tolist()
    fnx.manual_seed(5)
    fnx.cuda.manual_seed_all(123)
    fnx.cuda.manual_seed(7)
    assert fnx.randn(4).tolist() == expected
    assert fnx.cuda.current_device() == 0


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any", "var", "std"])
def test_reductions_take_numpy_keywords(op):
    x = fnx.tensor(np.arange(1.0, 7.0).reshape(2, 3))
    expected = getattr(fnx, op)(x, dim=1, keepdim=True)
    got = getattr(fnx, op)(x, axis=1, keepdims=True)
    assert got.shape == (2, 1) and np.allclose(got.numpy(), expected.numpy())


def test_utils_checkpoint_calls_the_block_and_recomputes_it():
    from fnx.utils.checkpoint import checkpoint

    calls = []

    def block(v, scale=1.0):
        calls.append(1)
        return (fnx.sin(v) * scale).sum()

    x = fnx.tensor([0.5, 1.0], dtype=fnx.float64, requires_grad=True)
    checkpoint(block, x, use_reentrant=False, scale=2.0).backward()
    assert len(calls) == 2   # the forward, and again in the backward pass
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos([0.5, 1.0]), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="preserve_rng_state=False"):
        checkpoint(block, x, preserve_rng_state=False)


def test_in_place_ops_on_data_and_detach_of_a_leaf_are_allowed_and_versioned():
    """Hugging Face's `_init_weights` writes `module.weight.data.normal_(...)`: allowed, unrecorded, and it
    bumps the shared version counter, so a backward that saved the old values refuses as in PyTorch."""
    p = fnx.nn.Parameter(fnx.zeros(1000))
    fnx.manual_seed(0)
    p.data.normal_(mean=0.0, std=0.02)
    assert p.requires_grad and p.grad_fn is None and 0.015 < float(p.std()) < 0.025
    y = (p * p).sum()
    p.detach().zero_()
    assert float(p.abs().sum()) == 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_compiled_module_stands_in_for_the_module():
    """nanoGPT: `model = torch.compile(model)`, then `model.train()`, `model.eval()`, `model.zero_grad()`."""
    model = fnx.nn.Sequential(fnx.nn.Linear(3, 2), fnx.nn.Dropout(0.1))
    compiled = fnx.compile(model)
    compiled.eval()
    assert not model.training and len(list(compiled.parameters())) == 2
    compiled(fnx.randn(4, 3)).sum().backward()
    assert model[0].weight.grad is not None
    compiled.zero_grad()
    assert model[0].weight.grad is None
    compiled.train()
    assert model.training
    with pytest.raises(AttributeError, match="no attribute 'not_there'"):
        compiled.not_there


def _hogwild_worker(model):
    opt = fnx.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        model(fnx.ones(2, 3)).sum().backward()
        opt.step()


def test_share_memory_lets_forked_processes_train_the_same_weights():
    import multiprocessing
    fnx.manual_seed(0)
    model = fnx.nn.Linear(3, 1)
    assert not model.weight.is_shared()
    model.share_memory()
    assert model.weight.is_shared() and model.bias.is_shared()
    before = model.weight.detach().clone()
    workers = [multiprocessing.get_context("fork").Process(target=_hogwild_worker, args=(model,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert all(w.exitcode == 0 for w in workers)
    # two processes, 5 steps each of lr 0.1 on a gradient of 2 (a batch of two ones) per weight
    np.testing.assert_allclose((before - model.weight.detach()).numpy(), [[2.0, 2.0, 2.0]], rtol=1e-5)


def test_storages_and_resize_follow_pytorch():
    x = fnx.arange(6.0)
    v = x.view(2, 3)
    assert x.untyped_storage().data_ptr() == v[1].untyped_storage().data_ptr()
    assert x.storage().size() == 6 and x.untyped_storage().nbytes() == 24 and x.storage().element_size() == 4
    assert x.clone().untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    y = fnx.arange(4.0)
    version = y._version[0]
    y.resize_(2, 3)
    assert y.shape == (2, 3) and y.reshape(-1).tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 0.0] and y._version[0] > version
    y.resize_(2)
    assert y.tolist() == [0.0, 1.0]
    assert y.resize_as_(fnx.zeros(1, 1)).shape == (1, 1)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        fnx.zeros(2, requires_grad=True).resize_(3)


def test_cuda_queries_without_a_gpu_are_zero_or_say_why():
    """As in a CPU build of PyTorch: memory counters are 0 and empty_cache does nothing; device, stream and event
    calls raise an error that says CUDA is not available (tests/test_cuda.py checks them on a GPU)."""
    if fnx.cuda.is_available():
        pytest.skip("a GPU is present: tests/test_cuda.py covers these")
    assert fnx.cuda.memory_allocated() == fnx.cuda.max_memory_allocated() == fnx.cuda.memory_reserved() == 0
    fnx.cuda.reset_peak_memory_stats()
    fnx.cuda.empty_cache()
    assert fnx.cuda.memory_stats()["allocated_bytes.all.peak"] == 0
    for call in (fnx.cuda.get_device_name, fnx.cuda.Stream, lambda: fnx.cuda.Event(enable_timing=True),
                 fnx.cuda.mem_get_info, fnx.cuda.current_stream):
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            call()
