"""The C loops that a model's layers and optimizers will call start building as they are made (on threads, their
compilers niced): the first training step with empty caches then waits for fewer compiles. Each layer starts the
loops its step takes, and only where its sizes would take them."""
import numpy as np

import fnx
from fnx.lowering import eager_kernels, gemm_kernels, nn_kernels, scatter_kernels, window_kernels
from fnx.ops.reduce import sum_p


def test_a_linear_layer_whose_products_take_it_starts_its_build(monkeypatch):
    """nn.Linear(k, n) starts building the float32 GEMM where 64 rows times its weight would take it: a model's
    first training step then need not wait for the compiler; smaller layers and other dtypes start nothing."""
    started, sums = [], []
    monkeypatch.setattr(gemm_kernels._LIBRARY, "start_functions", started.append)
    monkeypatch.setattr(eager_kernels._COLUMNS, "start_functions", sums.append)
    fnx.nn.Linear(128, 384)
    assert started == [["fnx_gemm_f32_strided"]] and sums == [["fnx_sum_columns_f32"]]   # its bias's gradient
    assert eager_kernels._sum(sum_p, np.ones((512, 384), np.float32), axes=(0,), keepdims=False) \
        is not None
    fnx.nn.Linear(128, 384, bias=False)
    fnx.nn.Linear(16, 16)
    assert len(sums) == 1
    assert gemm_kernels.takes(np.zeros((64, 128), np.float32), np.zeros((128, 384), np.float32))
    fnx.nn.Linear(64, 64)
    fnx.nn.Linear(128, 384, dtype=fnx.float64)
    assert not gemm_kernels.takes(np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32))
    assert len(started) == 2


def test_an_embedding_starts_building_its_backwards_loop(monkeypatch):
    """nn.Embedding starts the scatter-add loop its backward runs (rows of at least MIN_ROW floats), not for
    short rows, sparse gradients or a frozen table."""
    started = []
    monkeypatch.setattr(scatter_kernels._LIBRARY, "start_functions", started.append)
    fnx.nn.Embedding(100, 32)
    assert started == [["fnx_scatter_add_rows_f32"]]
    fnx.nn.Embedding(100, 4)
    fnx.nn.Embedding(100, 32, sparse=True)
    fnx.nn.Embedding.from_pretrained(fnx.zeros(100, 32))
    assert len(started) == 1



def test_a_convolution_starts_the_direct_loops_its_step_calls(monkeypatch):
    """Conv2d with enough output channels starts the direct convolution's loops (its frame's where padded) for its
    dtype; a transposed one, few output channels or another device start nothing."""
    started = []
    monkeypatch.setattr(window_kernels._LIBRARY, "start_functions", started.append)
    fnx.nn.Conv2d(1, 32, 3)
    assert started == [[f"fnx_{n}_f32" for n in ("transpose", "conv_direct", "conv_weight_direct",
                                                 "transpose_strided")]]
    fnx.nn.Conv2d(32, 64, 3, padding=1, dtype=fnx.float64)
    assert started[1][-1] == "fnx_pad_cl_f64"
    fnx.nn.Conv2d(8, 3, 3)
    fnx.nn.ConvTranspose2d(32, 64, 3)
    assert len(started) == 2
    net = fnx.nn.Conv2d(1, 32, 3)
    x = fnx.randn(64, 1, 28, 28, requires_grad=True)
    net(x).sum().backward()
    assert all(window_kernels._library(f) is not None for f in started[0])


def test_an_lstm_starts_its_loops_and_products(monkeypatch):
    """nn.LSTM starts its recurrence's loops (forward and backward) and the GEMM of its inputs' products; a GRU
    only the GEMM, a small LSTM neither loop."""
    loops, products = [], []
    monkeypatch.setattr(nn_kernels._LIBRARY, "start_functions", loops.append)
    monkeypatch.setattr(gemm_kernels._LIBRARY, "start_functions", products.append)
    fnx.nn.LSTM(128, 128, num_layers=2)
    assert loops == [["fnx_lstm_forward_f32", "fnx_lstm_backward_f32"]] and len(products) == 1
    fnx.nn.GRU(128, 128)
    fnx.nn.LSTM(8, 16)
    assert len(loops) == 1 and len(products) == 2
