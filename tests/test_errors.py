"""Bad input gets a clear error of PyTorch's exception type, naming the op and the shapes, dtypes or devices."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx import core
from fnx.core import ShapedArray
from fnx.ops import _families
from fnx.ops.elementwise import add_p, select_p
from fnx.tensor import make

CPU, CUDA0, CUDA1 = fnx.device("cpu"), fnx.device("cuda:0"), fnx.device("cuda:1")


def fake_cuda(values) -> fnx.Tensor:
    """A tensor that claims to live on cuda:0 (its data stays in numpy): enough to reach the device checks."""
    return make(np.asarray(values, dtype=np.float32), CUDA0)


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("op,name", [(fnx.add, "add"), (fnx.mul, "mul"), (fnx.sub, "sub"), (fnx.div, "div"),
                                     (fnx.maximum, "max"), (fnx.eq, "eq")])
def test_shape_mismatch_names_op_and_shapes(op, name):
    with pytest.raises(RuntimeError, match=rf"^{name}: the size of tensor a \(3\) must match the size of tensor b "
                                           r"\(4\) at non-singleton dimension 1 \(shapes \[2, 3\] and \[4\]\)"):
        op(fnx.ones(2, 3), fnx.ones(4))


def test_shape_mismatch_of_operators_and_inplace():
    with pytest.raises(RuntimeError, match=r"mul: .*shapes \[2, 3\] and \[3, 2\]"):
        fnx.ones(2, 3) * fnx.ones(3, 2)
    with pytest.raises(RuntimeError, match=r"add_: output with shape \[3\] doesn't match the broadcast shape"):
        fnx.ones(3).add_(fnx.ones(2, 3))
    with pytest.raises(RuntimeError, match=r"where: .*shapes \[2\] and \[3\] and \[2\]"):
        fnx.where(fnx.ones(2) > 0, fnx.ones(3), fnx.ones(2))


def test_broadcast_shapes_helper():
    assert _families.broadcast_shapes("op", (2, 1), (3,)) == (2, 3)
    assert _families.broadcast_shapes("op", (), (2, 2)) == (2, 2)
    with pytest.raises(RuntimeError, match=r"^myop: .*\(2\).*\(3\)"):
        _families.broadcast_shapes("myop", (2,), (3,))


def test_cat_shape_errors_name_both_full_shapes():
    with pytest.raises(RuntimeError, match=r"^cat: sizes of tensors must match except in dimension 0\. Expected size 3 "
                                           r"but got size 4 for tensor number 1 in the list \(shapes \[2, 3\] and "
                                           r"\[3, 4\]\)"):
        fnx.cat([fnx.ones(2, 3), fnx.ones(3, 4)])
    with pytest.raises(RuntimeError, match=r"^cat: tensors must have same number of dimensions: got 2 and 1 \(tensor "
                                           r"number 1; shapes \[2, 3\] and \[3\]\)"):
        fnx.cat([fnx.ones(2, 3), fnx.ones(3)])
    with pytest.raises(RuntimeError, match=r"shapes \[2, 3\] and \[2, 4, 1\]"):
        fnx.compile(lambda a, b: fnx.cat([a, b], 1))(fnx.ones(2, 3), fnx.ones(2, 4, 1))


# ---------------------------------------------------------------- dims
@pytest.mark.parametrize("call,op,lo,hi,got", [
    (lambda t: t.size(3), "size", -2, 1, 3),
    (lambda t: t.sum(dim=2), "sum", -2, 1, 2),
    (lambda t: t.sum(dim=(0, -3)), "sum", -2, 1, -3),
    (lambda t: t.argmax(dim=-3), "argmax", -2, 1, -3),
    (lambda t: t.transpose(0, 2), "transpose", -2, 1, 2),
    (lambda t: t.unsqueeze(4), "unsqueeze", -3, 2, 4),
])
def test_dim_out_of_range_is_an_index_error_with_the_range(call, op, lo, hi, got):
    with pytest.raises(IndexError, match=rf"{op}: dimension out of range \(expected to be in range of \[{lo}, {hi}\], "
                                         rf"but got {got}\)"):
        call(fnx.ones(2, 3))


def test_dim_of_a_zero_dim_tensor():
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        fnx.tensor(1.0).size(1)
    assert fnx.tensor(1.0).sum(dim=0).item() == 1.0


# ---------------------------------------------------------------- dtypes
def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="only tensors of floating point and complex dtype can require "
                                           "gradients, got fnx.int64"):
        fnx.tensor([1, 2]).requires_grad_()


def test_bool_negation_and_subtraction():
    m = fnx.tensor([True, False])
    with pytest.raises(RuntimeError, match="neg: negation, the `-` operator, on a bool tensor.*logical_not"):
        -m
    with pytest.raises(RuntimeError, match="sub: subtraction, the `-` operator, with two bool tensors.*logical_xor"):
        m - m


def test_bool_and_int_inputs_of_float_ops_are_promoted_not_rejected():
    assert fnx.sqrt(fnx.tensor([True, False])).tolist() == [1.0, 0.0]
    assert fnx.exp(fnx.tensor([0])).tolist() == [1.0]


def test_inplace_result_that_cannot_be_cast():
    with pytest.raises(RuntimeError, match="add_: result type float32 can't be cast to the desired output type int64"):
        fnx.tensor([1, 2]).add_(0.5)


@pytest.mark.parametrize("call,op,what", [
    (lambda a, b: a @ b, "matmul", "mat1 and mat2"),
    (fnx.mm, "mm", "mat1 and mat2"),
    (lambda a, b: fnx.bmm(a[None], b[None]), "bmm", "batch1 and batch2"),
    (lambda a, b: fnx.mv(a, b[0]), "mv", "mat and vec"),
    (lambda a, b: fnx.dot(a[0], b[0]), "dot", "both vectors"),
    (lambda a, b: fnx.einsum("ij,jk->ik", a, b), r"einsum\(\)", "all operands"),
    (F.linear, "linear", "input and weight"),
    (lambda a, b: F.linear(a, b.to(a.dtype), b[0]), "linear", "input and bias"),
    (lambda a, b: F.conv1d(a[None], b[None]), "conv1d", "input and weight"),
    (lambda a, b: F.conv2d(a[None, None], b[None, None]), "conv2d", "input and weight"),
    (lambda a, b: F.conv2d(a[None, None], b[None, None].to(a.dtype), b[0, :1]), "conv2d", "input and bias"),
], ids=["matmul", "mm", "bmm", "mv", "dot", "einsum", "linear", "linear_bias", "conv1d", "conv2d", "conv2d_bias"])
def test_products_of_mixed_dtypes_raise_like_pytorch(call, op, what):
    """No silent float64: a float32 model fed float64 data raises (PyTorch: "mat1 and mat2 must have the same
    dtype"), and so does an integer-float mix; elementwise ops still promote."""
    f32, f64, i64 = fnx.ones(2, 2), fnx.ones(2, 2, dtype=fnx.float64), fnx.ones(2, 2, dtype=fnx.int64)
    for a, b, names in ((f64, f32, "float64 and float32"), (i64, f32, "int64 and float32")):
        with pytest.raises(RuntimeError, match=rf"^{op}: {what} must have the same dtype, but got {names}; .*cast one "
                                               r"operand with \.float\(\), \.double\(\) or \.to\(dtype\)"):
            call(a, b)
    assert call(f64, f64).dtype is fnx.float64 and call(f32, f32).dtype is fnx.float32


def test_modules_reject_inputs_of_another_dtype_and_elementwise_ops_promote():
    with pytest.raises(RuntimeError, match="linear: input and weight must have the same dtype, but got float64 and "
                                           "float32"):
        fnx.nn.Linear(3, 2)(fnx.ones(4, 3, dtype=fnx.float64))
    with pytest.raises(RuntimeError, match="conv2d: input and weight must have the same dtype, but got float64 and "
                                           "float32"):
        fnx.nn.Conv2d(1, 1, 2)(fnx.ones(1, 1, 4, 4, dtype=fnx.float64))
    assert fnx.nn.Linear(3, 2).double()(fnx.ones(4, 3, dtype=fnx.float64)).dtype is fnx.float64
    f32, f64 = fnx.ones(2), fnx.ones(2, dtype=fnx.float64)
    assert (f32 * f64).dtype is fnx.float64 and fnx.outer(f32, f64).dtype is fnx.float64   # as in PyTorch


def test_integer_tensor_to_a_negative_power():
    for exponent in (-1, -20):
        with pytest.raises(RuntimeError, match=r"pow: Integers to negative integer powers are not allowed .*int64.*"
                                               r"\.float\(\)"):
            fnx.tensor([1, 2]) ** exponent


def test_cross_entropy_dtype_errors_name_the_fix():
    with pytest.raises(RuntimeError, match=r"cross_entropy: expected floating-point logits \(input\), got int64; "
                                           r"convert them with \.float\(\)"):
        F.cross_entropy(fnx.tensor([[1, 2, 3]]), fnx.tensor([1]))
    with pytest.raises(RuntimeError, match=r"cross_entropy: expected class-index targets of an integer dtype .*got a "
                                           r"float32 target of shape \[2\]; convert class indices with "
                                           r"target\.long\(\)"):
        F.cross_entropy(fnx.ones(2, 3), fnx.tensor([1.0, 0.0]))
    with pytest.raises(RuntimeError, match=r"nll_loss: expected target of an integer dtype .*target\.long\(\)"):
        F.nll_loss(fnx.ones(2, 3), fnx.tensor([1.0, 0.0]))
    # float class probabilities of the logits' shape stay valid targets, as in PyTorch
    probs = fnx.full((2, 3), 1 / 3)
    assert F.cross_entropy(fnx.zeros(2, 3), probs).item() == pytest.approx(np.log(3))
    assert F.cross_entropy(fnx.zeros(2, 3), fnx.tensor([1.0, 0.0]).long()).item() == pytest.approx(np.log(3))


def test_primitive_operands_must_share_a_dtype():
    a = ShapedArray((2,), fnx.float32, CPU)
    b = ShapedArray((2,), fnx.float64, CPU)
    with pytest.raises(TypeError, match="add: operands must share one dtype, got fnx.float32 and fnx.float64"):
        add_p.abstract(a, b)


def test_bad_dtype_arguments():
    with pytest.raises(TypeError, match="unknown dtype name 'complex32'"):
        fnx.zeros(2, dtype="complex32")
    with pytest.raises(TypeError, match="unsupported dtype"):
        fnx.ones(2).to(1.5)
    with pytest.raises(TypeError, match="no fnx equivalent"):
        fnx.from_numpy(np.ones(2, dtype=np.uint32))
    with pytest.raises(RuntimeError, match=r"mean\(\): .*floating point, got fnx.int64"):
        fnx.tensor([1, 2]).mean()


# ---------------------------------------------------------------- conversions
def test_item_of_many_elements():
    with pytest.raises(RuntimeError, match=r"item\(\): a tensor with 6 elements \(shape \[2, 3\]\) cannot be "
                                           r"converted to a Python scalar"):
        fnx.ones(2, 3).item()


def test_numpy_of_requires_grad():
    with pytest.raises(RuntimeError, match=r"numpy\(\): can't call numpy\(\) on a tensor that requires grad; use "
                                           r"tensor.detach\(\).numpy\(\) instead"):
        fnx.ones(2, requires_grad=True).numpy()


def test_bool_of_many_elements():
    with pytest.raises(RuntimeError, match=r"Boolean value of a tensor with 2 elements .* is ambiguous"):
        if fnx.ones(2):
            pass


def test_bad_creation_data():
    with pytest.raises(ValueError, match="rectangular"):
        fnx.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="could not infer a dtype"):
        fnx.tensor("abc")
    with pytest.raises(TypeError, match="could not infer a dtype"):
        fnx.tensor(None)
    with pytest.raises(RuntimeError, match=r"negative dimension: \[2, -1\]"):
        fnx.zeros(2, -1)


# ---------------------------------------------------------------- non-tensor arguments
def test_non_tensor_arguments_are_type_errors():
    with pytest.raises(TypeError, match=r"exp\(\): argument 'input' must be a Tensor, not list"):
        fnx.exp([1.0, 2.0])
    with pytest.raises(TypeError, match=r"sqrt\(\): argument 'input' must be a Tensor, not float"):
        fnx.sqrt(4.0)
    with pytest.raises(TypeError, match="abs.*arguments must be Tensors, got str"):
        fnx.abs("x")
    with pytest.raises(TypeError, match="add: expected a Tensor or a Python number, got object"):
        fnx.add(fnx.ones(2), object())
    with pytest.raises(TypeError, match="add: at least one argument must be a Tensor"):
        fnx.add(1, 2)
    with pytest.raises(TypeError):
        fnx.ones(2) + None


# ---------------------------------------------------------------- devices (no GPU needed: fake avals and tensors)
def test_same_device_helper_names_both_devices():
    a = ShapedArray((2,), fnx.float32, CPU)
    b = ShapedArray((2,), fnx.float32, CUDA0)
    assert _families.same_device("add", (a, a)) is CPU
    with pytest.raises(RuntimeError, match=r"add: expected all tensors to be on the same device, but found devices "
                                           r"cpu and cuda:0; move them with .to\(device\)"):
        _families.same_device("add", (a, b))


def test_abstract_rules_reject_mixed_devices():
    a = ShapedArray((2,), fnx.float32, CUDA0)
    b = ShapedArray((2,), fnx.float32, CUDA1)
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1"):
        add_p.abstract(a, b)
    c = ShapedArray((2,), fnx.bool, CPU)
    with pytest.raises(RuntimeError, match="where: .*cpu and cuda:0"):
        select_p.abstract(c, a, a)


def test_device_mismatch_message_of_core():
    class Arg:
        def __init__(self, device):
            self.device = device

    err = core._device_mismatch(add_p, [Arg(CPU), Arg(CUDA1)])
    assert isinstance(err, RuntimeError)
    assert str(err).startswith("add: expected all tensors to be on the same device, but found devices cpu and cuda:1")
    assert "never moves data silently" in str(err)


@pytest.mark.parametrize("call", [
    lambda a, b: a + b,
    lambda a, b: b * a,
    lambda a, b: fnx.maximum(a, b),
    lambda a, b: fnx.where(a > 0, b, a),
    lambda a, b: a.add_(b),
], ids=["add", "mul", "maximum", "where", "add_"])
def test_eager_ops_reject_mixed_devices(call):
    with pytest.raises(RuntimeError, match="expected all tensors to be on the same device, but found devices cpu "
                                           "and cuda:0"):
        call(fnx.ones(2), fake_cuda([1.0, 2.0]))


def test_unknown_device():
    with pytest.raises(RuntimeError, match="unknown device type 'tpu'"):
        fnx.ones(2).to("tpu")
    with pytest.raises(RuntimeError, match="unknown device type 'tpu'"):
        fnx.zeros(2, device="tpu")


# ---------------------------------------------------------------- autograd misuse
def test_autograd_errors_name_the_fix():
    x = fnx.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs.*gradient="):
        (x * 2).backward()
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad.*no_grad"):
        x.mul_(2)
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        fnx.ones(2).sum().backward()


def test_backend_failures_are_explained_with_shapes():
    """A backend error that no shape rule predicts still names the op, the dtypes and shapes."""
    from fnx.core import Primitive

    boom = Primitive("boom")

    def impl(xp, x):
        raise ArithmeticError("backend says no")

    boom.def_impl(impl)
    with pytest.raises(RuntimeError, match=r"boom failed on inputs \(float32\[2, 3\]\) with params \{\}: backend says "
                                           r"no"):
        boom.bind(fnx.ones(2, 3))
