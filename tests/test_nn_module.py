"""nn.Module: registration, iteration, state_dict, modes, conversion, hooks, repr, containers, modules as
pytrees under fnx.grad/vmap/jvp, functional_call, gradient clipping, and a short training run."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.tree import tree_flatten, tree_leaves, tree_map


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(fnx.ones(4))
        self.register_buffer("count", fnx.zeros(4))
        self.register_buffer("scratch", fnx.zeros(2), persistent=False)

    def forward(self, x):
        return F.tanh(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x))


def npy(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- parameters and registration
def test_parameter_is_a_leaf_tensor_sharing_memory():
    data = fnx.ones(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, fnx.Tensor) and p.requires_grad and p.is_leaf
    p.data.mul_(2)
    assert data.tolist() == [[2.0] * 3] * 2
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert type(p * 2) is fnx.Tensor
    assert not nn.Parameter(fnx.ones(1), requires_grad=False).requires_grad
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and q.data_ptr() != p.data_ptr()


def test_registration_and_iteration_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "head.weight", "head.bias"]
    assert [n for n, _ in net.named_buffers()] == ["block.count", "block.scratch"]
    assert [n for n, _ in net.named_children()] == ["block", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "head"]
    assert [n for n, _ in net.block.named_parameters(prefix="b", recurse=False)] == ["b.scale"]
    assert len(list(net.parameters())) == 5 and len(list(net.modules())) == 4
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.get_parameter("head.bias") is net.head.bias
    net.head = None
    assert [n for n, _ in net.named_children()] == ["block"]


def test_shared_parameters_and_modules_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_parameters(remove_duplicate=False)] == ["0.weight", "0.bias", "2.weight",
                                                                            "2.bias"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_attribute_errors_follow_pytorch():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(fnx.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'fnx.Tensor' as parameter 'weight'"):
        m.weight = fnx.ones(2, 2)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        m.register_buffer("weight", fnx.ones(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", fnx.ones(1))
    with pytest.raises(TypeError, match="fnx.nn.Parameter or None required"):
        m.register_parameter("p", fnx.ones(1))
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    m.bias = None
    assert m.bias is None and "bias" in m._parameters
    del m.weight
    assert [n for n, _ in m.named_parameters()] == []
    with pytest.raises(NotImplementedError, match="missing the required \"forward\""):
        nn.Module()(1)


# ---------------------------------------------------------------- state dict
def test_state_dict_keys_values_and_round_trip():
    fnx.manual_seed(0)
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["block.scale", "block.count", "block.fc.weight", "block.fc.bias", "head.weight",
                        "head.bias"]
    assert all(not v.requires_grad for v in sd.values())
    assert sd["head.weight"].data_ptr() == net.head.weight.data_ptr()
    assert net.state_dict(keep_vars=True)["head.weight"] is net.head.weight
    other = Net()
    result = other.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    x = fnx.randn(5, 3)
    np.testing.assert_array_equal(npy(other(x)), npy(net(x)))
    assert other.head.weight.data_ptr() != net.head.weight.data_ptr()  # copied, not aliased


def test_load_state_dict_strict_errors_and_non_strict_report():
    net = Net()
    sd = net.state_dict()
    del sd["head.bias"]
    sd["head.extra"] = fnx.zeros(1)
    with pytest.raises(RuntimeError) as err:
        Net().load_state_dict(sd)
    msg = str(err.value)
    assert msg.startswith("Error(s) in loading state_dict for Net:")
    assert 'Missing key(s) in state_dict: "head.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "head.extra".' in msg
    result = Net().load_state_dict(sd, strict=False)
    assert result == (["head.bias"], ["head.extra"])
    assert result.missing_keys == ["head.bias"]
    bad = net.state_dict()
    bad["head.weight"] = fnx.zeros(3, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for head.weight: copying a param with shape"):
        Net().load_state_dict(bad, strict=False)
    with pytest.raises(TypeError, match="dict-like"):
        Net().load_state_dict([1, 2])


def test_load_state_dict_casts_dtype_and_assign_mode():
    lin = nn.Linear(2, 2)
    sd = {"weight": fnx.ones(2, 2, dtype=fnx.float64), "bias": fnx.zeros(2, dtype=fnx.float64)}
    lin.load_state_dict(sd)
    assert lin.weight.dtype == fnx.float32 and lin.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    lin.load_state_dict(sd, assign=True)
    assert lin.weight.dtype == fnx.float64 and isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad


# ---------------------------------------------------------------- modes, conversion, grads
def test_train_eval_apply_and_requires_grad():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(), nn.BatchNorm1d(2)))
    assert all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert net[1][1].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("no")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Dropout", "BatchNorm1d", "Sequential", "Sequential"]
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_double_float_keep_parameter_objects():
    net = Net()
    w = net.head.weight
    out = net.to(fnx.float64)
    assert out is net and net.head.weight is w and w.dtype == fnx.float64
    assert net.block.count.dtype == fnx.float64
    bn = nn.BatchNorm1d(2).double()
    assert bn.num_batches_tracked.dtype == fnx.int64  # integer state is not cast
    net.float()
    assert w.dtype == fnx.float32
    with pytest.raises(TypeError, match="floating point"):
        net.to(fnx.int32)
    assert net.to("cpu") is net


def test_zero_grad():
    net = Net()
    net(fnx.randn(2, 3)).sum().backward()
    assert net.head.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert not net.head.weight.grad.numpy().any()
    net.zero_grad()
    assert net.head.weight.grad is None


# ---------------------------------------------------------------- hooks
def test_forward_hooks_and_handles():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: out + 1)
    lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    out = lin(fnx.randn(3, 2))
    np.testing.assert_allclose(npy(out), np.broadcast_to(npy(lin.bias) + 1, (3, 2)), rtol=1e-6)
    assert calls == ["first"]
    h1.remove()
    h2.remove()
    x = fnx.randn(1, 2)
    np.testing.assert_allclose(npy(lin(x)), npy(F.linear(x, lin.weight, lin.bias)))
    with lin.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True):
        np.testing.assert_allclose(npy(lin(x)), npy(F.linear(x * 2, lin.weight, lin.bias)), rtol=1e-6)
    np.testing.assert_allclose(npy(lin(x)), npy(F.linear(x, lin.weight, lin.bias)))


def test_always_call_hook_runs_when_forward_raises():
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_forward_hook(lambda m, args, out: seen.append(out), always_call=True)
    with pytest.raises(RuntimeError):
        lin(fnx.randn(3, 5))
    assert seen == [None]


# ---------------------------------------------------------------- repr and containers
def test_nested_repr_matches_pytorch_layout():
    net = nn.Sequential(OrderedDict(conv=nn.Conv2d(1, 2, 3, padding=1, bias=False), act=nn.ReLU(inplace=True),
                                    blocks=nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.Identity()])))
    assert repr(net) == (
        "Sequential(\n"
        "  (conv): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
        "  (act): ReLU(inplace=True)\n"
        "  (blocks): ModuleList(\n"
        "    (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)\n"
        "    (3): Identity()\n"
        "  )\n"
        ")")
    assert repr(nn.BatchNorm2d(3)) == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, " \
                                      "track_running_stats=True)"
    assert repr(nn.Dropout(0.2)) == "Dropout(p=0.2, inplace=False)"
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.LayerNorm(4)) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert repr(nn.ParameterList([fnx.ones(2, 3)])) == \
        "ParameterList(  (0): Parameter containing: [fnx.float32 of size 2x3])"


def test_sequential_container_operations():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b, c]
    assert list(seq[1:].state_dict()) == ["2.weight", "2.bias"]
    x = fnx.randn(4, 2)
    np.testing.assert_allclose(npy(seq(x)), npy(c(b(a(x)))))
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and isinstance(seq[3], nn.Sigmoid)
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Sigmoid"]
    assert list(seq._modules) == ["0", "1", "2"]
    seq.insert(1, nn.Tanh())
    assert isinstance(seq[1], nn.Tanh)
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(1, 1)), ("out", nn.Tanh())]))
    assert named.fc is named[0] and list(named.state_dict()) == ["fc.weight", "fc.bias"]
    with pytest.raises(IndexError, match="out of range"):
        seq[10]


def test_module_list_dict_and_parameter_containers():
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert len(ml) == 3 and isinstance(ml[-1], nn.Tanh) and len(ml[:2]) == 2
    assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias"]
    md = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
    assert list(md) == ["enc", "act"] and "enc" in md and md["act"] is md.act
    md.update({"dec": nn.Linear(2, 1)})
    assert list(md.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    pl = nn.ParameterList([fnx.ones(2), nn.Parameter(fnx.zeros(3))])
    assert isinstance(pl[0], nn.Parameter) and len(pl) == 2
    pl.append(fnx.ones(1))
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pd = nn.ParameterDict({"a": fnx.ones(2)})
    pd["b"] = fnx.zeros(1)
    assert list(pd.keys()) == ["a", "b"] and isinstance(pd["b"], nn.Parameter)
    assert list(pd.state_dict()) == ["a", "b"]


def test_deepcopy_gives_independent_modules():
    net = Net()
    twin = copy.deepcopy(net)
    assert isinstance(twin.head.weight, nn.Parameter)
    assert twin.head.weight.data_ptr() != net.head.weight.data_ptr()
    x = fnx.randn(2, 3)
    np.testing.assert_array_equal(npy(twin(x)), npy(net(x)))


# ---------------------------------------------------------------- modules as pytrees
def test_flatten_gives_parameters_then_float_buffers():
    net = Net()
    leaves, treedef = tree_flatten(net)
    expected = [p for _, p in net.named_parameters()] + [net.block.count, net.block.scratch]
    assert len(leaves) == len(expected) and all(a is b for a, b in zip(leaves, expected))
    rebuilt = treedef.unflatten([leaf * 2 for leaf in leaves])
    assert type(rebuilt) is Net and rebuilt is not net and rebuilt.block is not net.block
    np.testing.assert_allclose(npy(rebuilt.head.weight), 2 * npy(net.head.weight))
    assert net.head.weight is expected[3]  # the original is untouched
    bn = nn.BatchNorm1d(2)
    assert len(tree_leaves(bn)) == 4  # weight, bias, running_mean, running_var (the int counter is static)
    assert tree_flatten(Net())[1] == treedef  # structure, not identity
    assert tree_flatten(Net().eval())[1] != treedef


def test_grad_of_a_loss_returns_a_module_shaped_gradient_equal_to_backward():
    fnx.manual_seed(0)
    net = Net().double()
    x, y = fnx.randn(6, 3, dtype=fnx.float64), fnx.tensor([0, 1, 1, 0, 1, 0])

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x), y)

    g = fnx.grad(loss_fn)(net, x, y)
    assert type(g) is Net
    loss_fn(net, x, y).backward()
    for (name, p), (gname, gp) in zip(net.named_parameters(), g.named_parameters()):
        assert name == gname
        np.testing.assert_allclose(npy(gp), p.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert not g.block.count.numpy().any()
    stepped = tree_map(lambda p, d: p - 0.1 * d, net, g)
    np.testing.assert_allclose(npy(stepped.head.bias), npy(net.head.bias) - 0.1 * net.head.bias.grad.numpy())
    value, g2 = fnx.value_and_grad(loss_fn)(net, x, y)
    assert value.item() == pytest.approx(loss_fn(net, x, y).item())


def test_vmap_and_jvp_accept_modules():
    net = Net().double()
    x = fnx.randn(5, 3, dtype=fnx.float64)
    out = fnx.vmap(lambda m, xi: m(xi), in_axes=(None, 0))(net, x)
    np.testing.assert_allclose(npy(out), npy(net(x)), rtol=1e-12)
    ones = tree_map(fnx.ones_like, net)
    _, tangent = fnx.jvp(lambda m: m(x).sum(), (net,), (ones,))
    g = fnx.grad(lambda m: m(x).sum())(net)
    expected = sum(float(leaf.sum()) for leaf in tree_leaves(g))
    assert tangent.item() == pytest.approx(expected)


def test_batchnorm_state_inside_grad_updates_the_copy_not_the_original():
    bn = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    x = fnx.randn(8, 2)
    g = fnx.grad(lambda m: m(x).pow(2).sum())(bn)
    assert not bn[1].running_mean.numpy().any() and bn[1].num_batches_tracked.item() == 0
    assert not g[1].running_mean.numpy().any()
    fnx.grad(lambda xx: bn(xx).pow(2).sum())(x)  # module closed over: its state updates in place
    assert bn[1].running_mean.numpy().any() and bn[1].num_batches_tracked.item() == 1


# ---------------------------------------------------------------- functional_call
def test_functional_call_swaps_and_restores():
    lin = nn.Linear(2, 2)
    w0 = lin.weight
    new = {"weight": fnx.eye(2), "bias": fnx.zeros(2)}
    x = fnx.randn(3, 2)
    np.testing.assert_allclose(npy(nn.functional_call(lin, new, (x,))), npy(x))
    np.testing.assert_allclose(npy(nn.functional_call(lin, new, x)), npy(x))
    assert lin.weight is w0
    net = Net()
    params = {k: v.detach() for k, v in net.named_parameters()}
    g = fnx.grad(lambda p: nn.functional_call(net, p, (x[:, :1].expand(3, 3),)).sum())(params)
    assert sorted(g) == sorted(params)
    net(x[:, :1].expand(3, 3)).sum().backward()
    for k, v in net.named_parameters():
        np.testing.assert_allclose(npy(g[k]), v.grad.numpy(), rtol=1e-5, atol=1e-6)
    stacked = {k: fnx.stack([v, 2 * v]) for k, v in params.items()}
    ens = fnx.vmap(lambda p: nn.functional_call(net, p, (x[:, :1].expand(3, 3),)))(stacked)
    assert ens.shape == (2, 3, 2)
    with pytest.raises(RuntimeError, match="Missing key"):
        nn.functional_call(lin, {"weight": fnx.eye(2)}, (x,), strict=True)


def test_functional_call_unties_shared_weights():
    lin = nn.Linear(2, 2, bias=False)
    seq = nn.Sequential(lin, lin)
    x = fnx.randn(1, 2)
    out = nn.functional_call(seq, {"0.weight": 2 * fnx.eye(2)}, (x,))
    np.testing.assert_allclose(npy(out), 4 * npy(x), rtol=1e-6)
    out = nn.functional_call(seq, {"0.weight": 2 * fnx.eye(2)}, (x,), tie_weights=False)
    np.testing.assert_allclose(npy(out), npy(lin(2 * x)), rtol=1e-6)


# ---------------------------------------------------------------- utils and training
def test_clip_grad_norm_and_value():
    a, b = nn.Parameter(fnx.zeros(2)), nn.Parameter(fnx.zeros(2))
    a.grad, b.grad = fnx.tensor([3.0, 0.0]), fnx.tensor([0.0, 4.0])
    total = nn.utils.clip_grad_norm_([a, b], 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(a.grad.numpy(), [0.6, 0.0], rtol=1e-5)
    assert nn.utils.clip_grad_norm_([a, b], 10.0).item() == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 0.8], rtol=1e-5)  # no scaling when below max_norm
    assert nn.utils.clip_grad_norm_([a, b], 1.0, norm_type="inf").item() == pytest.approx(0.8, rel=1e-5)
    a.grad = fnx.tensor([float("inf"), 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
    a.grad = fnx.tensor([-3.0, 0.5])
    nn.utils.clip_grad_value_(a, 1.0)
    assert a.grad.tolist() == [-1.0, 0.5]
    vec = nn.utils.parameters_to_vector([a, b])
    nn.utils.vector_to_parameters(vec + 1, [a, b])
    assert a.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, "inf", 0.0])
def test_total_norm_of_host_gradients_equals_the_op_path(norm_type):
    """Concrete CPU gradients take numpy's norms directly; under a transform the same norm runs through ops."""
    rng = np.random.default_rng(0)
    grads = [fnx.tensor(rng.standard_normal(s).astype(np.float32)) for s in [(3, 4), (5,), (2, 2, 2)]]
    fast = nn.utils.get_total_norm(grads, norm_type)
    traced = fnx.vmap(lambda g: nn.utils.get_total_norm([g, *grads[1:]], norm_type))(grads[0][None])
    assert fast.dtype is fnx.float32 and fast.shape == ()
    np.testing.assert_allclose(fast.item(), traced[0].item(), rtol=1e-6)
    if norm_type != 0.0:   # the 0-"norm" of the norms counts nonzero tensors, as in PyTorch
        flat = np.concatenate([g.numpy().ravel() for g in grads]).astype(np.float64)
        np.testing.assert_allclose(fast.item(), np.linalg.norm(flat, float(norm_type)), rtol=1e-5)


def test_mlp_training_reduces_the_loss():
    fnx.manual_seed(0)
    x = fnx.randn(64, 2)
    y = ((x[:, 0] * x[:, 1]) > 0).long()
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    losses = []
    for _ in range(60):
        loss = F.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        with fnx.no_grad():
            for p in model.parameters():
                p.sub_(0.5 * p.grad)
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


def test_functional_training_step_with_grad_and_tree_map():
    fnx.manual_seed(1)
    x = fnx.randn(32, 3)
    y = x @ fnx.tensor([[1.0], [-2.0], [0.5]])
    model = nn.Linear(3, 1)

    def loss_fn(m):
        return F.mse_loss(m(x), y)

    start = loss_fn(model).item()
    for _ in range(30):
        g = fnx.grad(loss_fn)(model)
        model = tree_map(lambda p, d: (p - 0.1 * d).detach(), model, g)
    assert isinstance(model, nn.Linear) and loss_fn(model).item() < 0.05 * start


def test_replacing_a_child_parameter_or_buffer_keeps_its_place():
    """As in PyTorch: `seq[0] = layer`, `m.weight = Parameter(...)` and a new buffer value keep the order."""
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    seq[0] = nn.Linear(2, 3)
    seq.add_module("1", nn.Tanh())
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear"]
    lin = nn.Linear(2, 2)
    lin.weight = nn.Parameter(fnx.ones(2, 2))
    assert [name for name, _ in lin.named_parameters()] == ["weight", "bias"]
    bn = nn.BatchNorm1d(2)
    bn.running_mean = nn.Buffer(fnx.ones(2))
    assert [name for name, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
