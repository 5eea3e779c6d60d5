"""Proden's network in numpy: its gradients against finite differences, its schedule and optimiser against their formulas."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from pll.methods._perceptron import Adam, Perceptron, one_cycle
from pll.utils._mlp import BN_EPS


def soft_loss(net, X, T):
    """The weighted cross-entropy Σ_c t_c (−log p_c), averaged over rows, in float64; running statistics left as they were."""
    kept = [r.copy() for r in net.running_mean], [r.copy() for r in net.running_var]
    P = net.forward(X, train=True).astype(np.float64)
    net.running_mean, net.running_var = kept
    return -(T * np.log(P)).sum() / len(X), P


def pre_activations(net, X):
    """Each hidden layer's input to its ReLU, for the batch ``X`` (normalised by its own statistics)."""
    out, h = [], X
    for i in range(len(net.running_mean)):
        z = h @ net._linear[2 * i] + net._linear[2 * i + 1]
        a = np.maximum(z, 0)
        h = (a - a.mean(axis=0)) / np.sqrt(a.var(axis=0) + BN_EPS) * net._norm[2 * i] + net._norm[2 * i + 1]
        out.append(z)
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])  # assume() keeps off the kinks
@given(seed=st.integers(0, 2**16), rows=st.integers(6, 20), hidden=st.lists(st.integers(3, 8), min_size=1, max_size=3))
def test_backward_is_the_gradient_of_the_soft_cross_entropy(seed, rows, hidden):
    rng = np.random.default_rng(seed)
    net = Perceptron(4, 3, tuple(hidden), rng)
    net.params += rng.normal(0, 0.1, net.params.size).astype(np.float32)  # scales and shifts away from 1 and 0
    X = rng.normal(size=(rows, 4)).astype(np.float32)
    T = rng.dirichlet(np.ones(3), rows) * rng.uniform(0.5, 2.0, (rows, 1))  # targets need not sum to 1
    _, P = soft_loss(net, X, T)
    # away from ReLU's kink, where differences are not derivatives: every unit active on two rows, none near 0
    for _, z, _, _ in net._cache[0]:
        assume(((z > 0).sum(axis=0) >= 2).all())
    assume(min(np.abs(np.concatenate([z.ravel() for z in pre_activations(net, X)]))) > 0.005)
    net.backward(((P * T.sum(axis=1, keepdims=True) - T) / rows).astype(np.float32))
    grads = net.grads.astype(np.float64)
    base = net.params.copy()
    for _ in range(3):  # directional derivatives by central differences, in float32 arithmetic
        d = rng.normal(size=base.size)
        d /= np.linalg.norm(d)
        eps = 1e-3
        net.params[:] = base + eps * d
        up, _ = soft_loss(net, X, T)
        net.params[:] = base - eps * d
        down, _ = soft_loss(net, X, T)
        net.params[:] = base
        numeric, analytic = (up - down) / (2 * eps), grads @ d
        assert abs(numeric - analytic) <= 2e-3 + 2e-2 * abs(analytic), (numeric, analytic)


def test_batch_normalisation_in_training_and_with_running_statistics():
    rng = np.random.default_rng(0)
    net = Perceptron(3, 2, (5,), rng)
    X = rng.normal(size=(8, 3)).astype(np.float32)
    W, b = net._linear[0], net._linear[1]
    a = np.maximum(X @ W + b, 0)
    net.forward(X, train=True)
    # the running statistics move a tenth of the way to the batch's (the unbiased variance, as PyTorch)
    np.testing.assert_allclose(net.running_mean[0], 0.1 * a.mean(axis=0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(net.running_var[0], 0.9 + 0.1 * a.var(axis=0, ddof=1), rtol=1e-5)
    # predicting uses them: the hidden layer is (a - running mean) / sqrt(running var + eps)
    hidden = (a - net.running_mean[0]) / np.sqrt(net.running_var[0] + BN_EPS)
    logits = hidden @ net._linear[2] + net._linear[3]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(net.forward(X), expected / expected.sum(axis=1, keepdims=True), rtol=1e-5)
    # one row: its batch variance is 0, and the running variance takes it as it is (no division by m - 1 = 0)
    one = Perceptron(3, 2, (5,), rng)
    assert np.isfinite(one.forward(X[:1], train=True)).all() and np.isfinite(one.running_var[0]).all()


def test_initialisation_as_pytorch_and_a_pickle_that_still_shares_the_buffer():
    net = Perceptron(16, 3, (10, 6), np.random.default_rng(1))
    assert net.params.dtype == np.float32 and net.params.size == 16 * 10 + 10 + 10 * 6 + 6 + 6 * 3 + 3 + 2 * (10 + 6)
    W0 = net._linear[0]
    assert np.abs(W0).max() <= 1 / 4 and np.abs(W0).max() > 0.2  # uniform in ±1/sqrt(16)
    back = pickle.loads(pickle.dumps(net))
    X = np.random.default_rng(2).normal(size=(5, 16)).astype(np.float32)
    np.testing.assert_array_equal(back.forward(X), net.forward(X))
    back.params[:] = 0  # the layers are views of the unpickled buffer, not copies
    assert not back._linear[0].any() and not back._norm[0].any()


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


def test_adam_with_weight_decay_follows_its_formula():
    params = np.array([1.0, -2.0, 0.5], np.float32)
    grads = np.array([0.3, 0.1, -0.2], np.float32)
    opt = Adam(3, weight_decay=0.1)
    m = v = np.zeros(3)
    p = params.astype(np.float64)
    for t, (lr, beta1) in enumerate([(0.01, 0.9), (0.02, 0.85), (0.01, 0.95)], start=1):
        g = grads + 0.1 * p
        m = beta1 * m + (1 - beta1) * g
        v = 0.999 * v + 0.001 * g * g
        p = p - lr / (1 - beta1**t) * m / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
        opt.step(params, grads, lr, beta1)
    np.testing.assert_allclose(params, p, rtol=1e-5)
    assert math.isfinite(float(params.sum()))
