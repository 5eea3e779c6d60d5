"""pll's PyTorch network: the same network as PyTorch's own modules, its flat gradient buffer, its optimiser, schedule and pickles."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the networks need the deep extra (PyTorch)")

from pll.errors import InvalidParameterError  # noqa: E402
from pll.utils._deep import resolve_device  # noqa: E402
from pll.utils._mlp import (  # noqa: E402
    BN_EPS, Adam, Perceptron, as_tensor, cpu_settings, one_cycle, subnormals_flushed,
)


def modules_like(net):
    """``torch.nn`` modules holding copies of ``net``'s parameters: the network written the usual way."""
    layers, sizes = [], net.sizes
    for i, (a, c) in enumerate(zip(sizes[:-1], sizes[1:])):
        linear = torch.nn.Linear(a, c)
        with torch.no_grad():
            linear.weight.copy_(net._linear[2 * i].detach().T)
            linear.bias.copy_(net._linear[2 * i + 1].detach())
        layers.append(linear)
        if i < len(sizes) - 2:
            norm = torch.nn.BatchNorm1d(c, eps=BN_EPS)
            with torch.no_grad():
                norm.weight.copy_(net._norm[2 * i].detach())
                norm.bias.copy_(net._norm[2 * i + 1].detach())
            layers += [torch.nn.ReLU(), norm]
    return torch.nn.Sequential(*layers)  # Linear, ReLU, BatchNorm per hidden layer, then the output Linear


def test_forward_gradients_and_running_statistics_equal_pytorchs_modules():
    rng = np.random.default_rng(0)
    net = Perceptron(6, 4, (9, 7), rng)
    with torch.no_grad():  # scales and shifts away from 1 and 0
        net.params += torch.from_numpy(rng.normal(0, 0.1, net.params.numel()).astype(np.float32))
    seq = modules_like(net)
    X = as_tensor(rng.normal(size=(12, 6)), "cpu")
    T = as_tensor(rng.dirichlet(np.ones(4), 12), "cpu")
    net.zero_grad()
    loss = torch.nn.functional.cross_entropy(net.logits(X, train=True), T)
    loss.backward()
    expected = torch.nn.functional.cross_entropy(seq.train()(X), T)
    expected.backward()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    linear = [m for m in seq if isinstance(m, torch.nn.Linear)]
    norms = [m for m in seq if isinstance(m, torch.nn.BatchNorm1d)]
    for i, layer in enumerate(linear):  # autograd added every gradient into the flat buffer's views
        torch.testing.assert_close(net._linear[2 * i].grad, layer.weight.grad.T)
        torch.testing.assert_close(net._linear[2 * i + 1].grad, layer.bias.grad)
    for i, norm in enumerate(norms):
        torch.testing.assert_close(net._norm[2 * i].grad, norm.weight.grad)
        torch.testing.assert_close(net._norm[2 * i + 1].grad, norm.bias.grad)
        torch.testing.assert_close(net.running_mean[i], norm.running_mean)
        torch.testing.assert_close(net.running_var[i], norm.running_var)
    assert net.grads.abs().sum() > 0 and net.grads.shape == net.params.shape
    with torch.no_grad():  # inference normalises with the running statistics, as eval mode
        P = torch.softmax(seq.eval()(X), dim=1).numpy()
    np.testing.assert_allclose(net.predict_proba(X.numpy(), np.float32), P, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(net.predict_proba(X.numpy()), P, rtol=1e-4, atol=1e-6)  # float64 copy


def test_zero_grad_clears_and_a_second_backward_accumulates():
    net = Perceptron(3, 2, (4,), np.random.default_rng(1))
    X = as_tensor(np.random.default_rng(2).normal(size=(5, 3)), "cpu")
    net.logits(X, train=True).sum().backward()
    once = net.grads.clone()
    net.logits(X, train=True).sum().backward()
    torch.testing.assert_close(net.grads, 2 * once)
    net.zero_grad()
    assert not net.grads.any()


@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_on_the_flat_buffer_equals_torch_optim(decoupled):
    net = Perceptron(5, 3, (6,), np.random.default_rng(3))
    seq = modules_like(net)
    reference = (torch.optim.AdamW if decoupled else torch.optim.Adam)(seq.parameters(), weight_decay=0.1)
    opt = Adam(net, weight_decay=0.1, decoupled=decoupled)
    rng = np.random.default_rng(4)
    for lr, beta1 in [(0.01, 0.9), (0.02, 0.85), (0.01, 0.95)]:
        X = as_tensor(rng.normal(size=(8, 5)), "cpu")
        T = as_tensor(rng.dirichlet(np.ones(3), 8), "cpu")
        net.zero_grad()
        torch.nn.functional.cross_entropy(net.logits(X, train=True), T).backward()
        opt.step(lr, beta1)
        reference.zero_grad()
        torch.nn.functional.cross_entropy(seq.train()(X), T).backward()
        for group in reference.param_groups:
            group["lr"], group["betas"] = lr, (beta1, 0.999)
        reference.step()
    linear = [m for m in seq if isinstance(m, torch.nn.Linear)]
    for i, layer in enumerate(linear):
        torch.testing.assert_close(net._linear[2 * i].detach(), layer.weight.detach().T, rtol=1e-5, atol=1e-6)


def test_adam_with_weight_decay_follows_its_formula():
    net = Perceptron(1, 2, (1,), np.random.default_rng(0))
    start = np.linspace(-1, 1, net.params.numel())
    grads = np.cos(np.arange(net.params.numel()))
    with torch.no_grad():
        net.params.copy_(torch.from_numpy(start))
    opt = Adam(net, weight_decay=0.1)
    m = v = np.zeros_like(start)
    p = start.copy()
    for t, (lr, beta1) in enumerate([(0.01, 0.9), (0.02, 0.85), (0.01, 0.95)], start=1):
        for view, grad in zip(net.views, net.views_of(torch.from_numpy(grads).float())):
            view.grad = grad.clone()
        g = grads + 0.1 * p
        m = beta1 * m + (1 - beta1) * g
        v = 0.999 * v + 0.001 * g * g
        p = p - lr / (1 - beta1**t) * m / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        opt.step(lr, beta1)
    np.testing.assert_allclose(net.params.numpy(), p, rtol=1e-5)


def test_initialisation_as_pytorch_and_a_pickle_that_still_shares_the_buffer():
    net = Perceptron(16, 3, (10, 6), np.random.default_rng(1))
    assert net.params.dtype == torch.float32
    assert net.params.numel() == 16 * 10 + 10 + 10 * 6 + 6 + 6 * 3 + 3 + 2 * (10 + 6)
    W0 = net._linear[0].detach()
    assert W0.abs().max() <= 1 / 4 and W0.abs().max() > 0.2  # uniform in ±1/sqrt(16)
    back = pickle.loads(pickle.dumps(net))
    X = np.random.default_rng(2).normal(size=(5, 16))
    np.testing.assert_array_equal(back.predict_proba(X), net.predict_proba(X))
    with torch.no_grad():
        back.params.zero_()  # the layers are views of the unpickled buffer, not copies
    assert not back._linear[0].any() and not back._norm[0].any()


def test_a_pickle_of_the_numpy_network_of_pll_0_2_loads():
    """Version 0.2's network pickled its flat float32 buffer and running statistics as numpy arrays in this layout."""
    rng = np.random.default_rng(5)
    sizes = (4, 6, 3)
    size = 4 * 6 + 6 + 6 * 3 + 3 + 2 * 6
    state = {"sizes": sizes, "params": rng.normal(size=size).astype(np.float32),
             "running_mean": [rng.normal(size=6).astype(np.float32)],
             "running_var": [rng.uniform(0.5, 2, size=6).astype(np.float32)]}
    net = object.__new__(Perceptron)
    net.__setstate__(state)
    X = rng.normal(size=(7, 4))
    W1, b1 = state["params"][:24].reshape(4, 6), state["params"][24:30]
    W2, b2 = state["params"][30:48].reshape(6, 3), state["params"][48:51]
    scale, shift = state["params"][51:57], state["params"][57:63]
    h = (np.maximum(X @ W1 + b1, 0) - state["running_mean"][0]) / np.sqrt(state["running_var"][0] + BN_EPS)
    logits = (h * scale + shift) @ W2 + b2
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(net.predict_proba(X), P / P.sum(axis=1, keepdims=True), rtol=1e-5)


def test_cpu_settings_flush_subnormals_inside_and_restore_the_threads_and_the_flag_after():
    threads = torch.get_num_threads()
    assert not subnormals_flushed()
    with cpu_settings(1):
        assert subnormals_flushed() and torch.get_num_threads() == 1
        assert (torch.softmax(torch.tensor([[0.0, -95.0]]), dim=1)[0, 1] == 0).item()  # exp(-95): subnormal, so 0
    assert not subnormals_flushed() and torch.get_num_threads() == threads
    torch.set_flush_denormal(True)
    try:
        with cpu_settings(1):
            pass
        assert subnormals_flushed()  # a caller's own flag is kept
    finally:
        torch.set_flush_denormal(False)


def test_one_thread_training_is_deterministic():
    def train():
        net = Perceptron(8, 3, (16, 16), np.random.default_rng(7))
        opt = Adam(net, 1e-4)
        rng = np.random.default_rng(8)
        X, T = rng.normal(size=(64, 8)), rng.dirichlet(np.ones(3), 64)
        with cpu_settings(1):
            for step in range(20):
                rows = rng.permutation(64)[:16]
                net.zero_grad()
                torch.nn.functional.cross_entropy(net.logits(as_tensor(X[rows], "cpu"), train=True),
                                                  as_tensor(T[rows], "cpu")).backward()
                opt.step(*one_cycle(step, 20, 1e-2))
        return net.params.clone()

    assert torch.equal(train(), train())


def test_one_cycle_rises_then_falls_as_pytorch_documents():
    total, peak = 1000, 0.01
    lr = np.array([one_cycle(t, total, peak)[0] for t in range(total)])
    beta1 = np.array([one_cycle(t, total, peak)[1] for t in range(total)])
    assert lr[0] == pytest.approx(peak / 25) and beta1[0] == pytest.approx(0.95)
    top = int(lr.argmax())
    assert top == 299 and lr[top] == pytest.approx(peak) and beta1[top] == pytest.approx(0.85)
    assert lr[-1] == pytest.approx(peak / 25 / 1e4) and beta1[-1] == pytest.approx(0.95)
    assert (np.diff(lr[:top + 1]) > 0).all() and (np.diff(lr[top:]) < 0).all()
    assert 0 < one_cycle(0, 1, peak)[0] <= peak  # one step: no division by zero
    assert math.isfinite(one_cycle(5, 10, peak)[0])


def test_devices_a_missing_gpu_and_nonsense_are_refused_in_one_line():
    assert resolve_device("cpu", "Proden").type == "cpu"
    assert resolve_device("auto", "Proden").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(InvalidParameterError, match="device='tpu9' is not a device"):
        resolve_device("tpu9", "Proden")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidParameterError, match="PyTorch sees no GPU here"):
            resolve_device("cuda", "Proden")
