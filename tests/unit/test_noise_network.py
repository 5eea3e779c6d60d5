"""SquaredLossMLP: its loss and gradients, the SGD step, determinism, the classifier API, and how much it learns.

The reference forward pass below is written independently of the module, in
numpy; PyTorch's gradients and the SGD step are checked against its central
finite differences.
"""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_classification
from sklearn.utils.estimator_checks import check_estimator

torch = pytest.importorskip("torch", reason="the noise network needs the deep extra (PyTorch)")

from pll.noise._network import SquaredLossMLP, squared_loss  # noqa: E402
from pll.utils._mlp import Perceptron, as_tensor  # noqa: E402

NAMES = ("coefs", "intercepts", "gammas", "betas")


def reference_forward(params, X, T):
    """Training-mode loss and the post-ReLU activations of each hidden layer (loop-free per layer)."""
    coefs, intercepts, gammas, betas = (params[k] for k in NAMES)
    h, activations = X, []
    for i in range(len(gammas)):
        a = np.maximum(h @ coefs[i] + intercepts[i], 0.0)
        activations.append(a)
        centred = a - a.mean(axis=0)
        biased_var = (centred**2).mean(axis=0)
        h = gammas[i] * centred / np.sqrt(biased_var + 1e-5) + betas[i]
    logits = h @ coefs[-1] + intercepts[-1]
    P = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return np.mean(np.sum((T - P) ** 2, axis=1)), activations


def numerical_gradients(params, X, T, step=1e-6):
    grads = {k: [np.zeros_like(p) for p in params[k]] for k in NAMES}
    for k in NAMES:
        for p, g in zip(params[k], grads[k]):
            for idx in np.ndindex(p.shape):
                old = p[idx]
                p[idx] = old + step
                up = reference_forward(params, X, T)[0]
                p[idx] = old - step
                down = reference_forward(params, X, T)[0]
                p[idx] = old
                g[idx] = (up - down) / (2 * step)
    return grads


def tiny_problem(seed=0, d=4, hidden=(5, 6), l=3, n=7):
    rng = np.random.default_rng(seed)
    sizes = [d, *hidden, l]
    params = {
        "coefs": [rng.normal(size=(a, b)) for a, b in zip(sizes[:-1], sizes[1:])],
        "intercepts": [rng.normal(0.5, 0.5, size=b) for b in sizes[1:]],  # mostly active ReLUs
        "gammas": [rng.uniform(0.5, 2.0, size=w) for w in hidden],
        "betas": [rng.normal(size=w) for w in hidden],
    }
    X = rng.normal(size=(n, d))
    T = np.eye(l)[rng.integers(0, l, size=n)]
    return params, X, T


def layers(net):
    """The network's parameters by kind, as numpy copies: weights, biases, scales, shifts."""
    views = [v.detach().numpy().copy() for v in net._linear + net._norm]
    n_linear = len(net._linear)
    return dict(zip(NAMES, (views[:n_linear:2], views[1:n_linear:2], views[n_linear::2], views[n_linear + 1::2])))


def network_with(params):
    """A float64 Perceptron holding ``params`` (the layout of :func:`tiny_problem`)."""
    sizes = [params["coefs"][0].shape[0], *(W.shape[1] for W in params["coefs"])]
    net = Perceptron(sizes[0], sizes[-1], tuple(sizes[1:-1]), np.random.default_rng(0), dtype=np.float64)
    with torch.no_grad():
        for k, views in zip(NAMES, (net._linear[::2], net._linear[1::2], net._norm[::2], net._norm[1::2])):
            for view, value in zip(views, params[k]):
                view.copy_(torch.from_numpy(value))
    return net


def fitted_params(model):
    return layers(model.network_)


# ---------------------------------------------------------------- backpropagation and the SGD step


@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_match_finite_differences(seed):
    params, X, T = tiny_problem(seed)
    net = network_with(params)
    net.zero_grad()
    loss = squared_loss(net.logits(as_tensor(X, "cpu", None), train=True), as_tensor(T, "cpu", None))
    loss.backward()
    assert loss.item() == pytest.approx(reference_forward(params, X, T)[0], rel=1e-12)
    numeric = numerical_gradients(params, X, T)
    grads = [v.grad.numpy() for v in net._linear + net._norm]
    n_linear = len(net._linear)
    analytic_by_kind = (grads[:n_linear:2], grads[1:n_linear:2], grads[n_linear::2], grads[n_linear + 1::2])
    for k, analytic in zip(NAMES, analytic_by_kind):
        assert len(analytic) == len(params[k])
        for i, (a, f) in enumerate(zip(analytic, numeric[k])):
            assert a.shape == f.shape
            err = np.linalg.norm(a - f) / (np.linalg.norm(a) + np.linalg.norm(f))
            assert err < 1e-5, f"{k}[{i}]: relative error {err:.2e}"


def test_one_sgd_step_and_running_statistics():
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(20, 4)), rng.integers(0, 3, size=20)
    T = np.eye(3)[y]
    kw = dict(hidden=(5, 6), batch_size=64, learning_rate=0.1, random_state=3)
    start = fitted_params(SquaredLossMLP(epochs=0, **kw).fit(X, y))  # same seed: the same initialisation
    after = SquaredLossMLP(epochs=1, **kw).fit(X, y)  # one full batch, so the shuffle does not matter
    grads = numerical_gradients(start, X, T)
    for k in NAMES:
        for p0, g, p1 in zip(start[k], grads[k], fitted_params(after)[k]):
            np.testing.assert_allclose(p1, p0 - 0.1 * g, rtol=0, atol=1e-8)
    _, activations = reference_forward(start, X, T)
    running = [r.numpy() for r in after.network_.running_mean], [r.numpy() for r in after.network_.running_var]
    for a, mean, var in zip(activations, *running):
        np.testing.assert_allclose(mean, 0.1 * a.mean(axis=0), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(var, 0.9 + 0.1 * a.var(axis=0, ddof=1), rtol=1e-12)


def test_pytorch_initialisation():
    X, y = np.random.default_rng(0).normal(size=(10, 50)), np.arange(10) % 4
    model = SquaredLossMLP(hidden=(200, 100), epochs=0, random_state=0).fit(X, y)
    params = fitted_params(model)
    assert [W.shape for W in params["coefs"]] == [(50, 200), (200, 100), (100, 4)]
    for W, b in zip(params["coefs"], params["intercepts"]):
        bound = 1 / np.sqrt(W.shape[0])
        assert np.abs(W).max() <= bound and np.abs(b).max() <= bound
        assert np.abs(W).max() > 0.95 * bound and abs(W.mean()) < 0.05 * bound  # fills the interval, centred
    net = model.network_
    for w, bb, m, v in zip(params["gammas"], params["betas"], net.running_mean, net.running_var):
        assert (w == 1).all() and (bb == 0).all() and (m == 0).all() and (v == 1).all()


def test_one_row_batches_are_skipped():
    X, y = np.random.default_rng(0).normal(size=(65, 3)), np.arange(65) % 3
    model = SquaredLossMLP(hidden=(8,), epochs=2, random_state=0).fit(X, y)  # batches of 64 and 1
    assert np.isfinite(model.predict_proba(X)).all()
    single = SquaredLossMLP(hidden=(8,), random_state=0).fit(X[:1], y[:1])  # every batch skipped
    untrained = SquaredLossMLP(hidden=(8,), epochs=0, random_state=0).fit(X[:1], y[:1])
    for a, b in zip(fitted_params(single)["coefs"], fitted_params(untrained)["coefs"]):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- determinism and API


def test_same_seed_same_model_other_seed_other_model():
    X, y = make_classification(120, n_features=6, n_informative=4, n_classes=3, random_state=0)
    proba = [SquaredLossMLP(hidden=(16, 16), random_state=s).fit(X, y).predict_proba(X) for s in (7, 7, 8)]
    np.testing.assert_array_equal(proba[0], proba[1])
    assert not np.allclose(proba[0], proba[2])


def test_classifier_api_with_string_labels():
    X, y = make_blobs(90, centers=3, n_features=4, random_state=0)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    model = SquaredLossMLP(hidden=(16,), random_state=0).fit(X, names)
    assert list(model.classes_) == ["setosa", "versicolor", "virginica"]
    assert model.n_features_in_ == 4
    proba = model.predict_proba(X[:10])
    assert proba.shape == (10, 3) and (proba >= 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    pred = model.predict(X)
    assert set(pred) <= set(model.classes_)
    np.testing.assert_array_equal(model.predict(X[:10]), model.classes_[proba.argmax(axis=1)])


@pytest.mark.parametrize(
    "params", [{"hidden": (5, 0)}, {"hidden": (5, 2.5)}, {"epochs": -1}, {"batch_size": 1}, {"learning_rate": 0.0}]
)
def test_invalid_parameters_raise_at_fit(params):
    model = SquaredLossMLP(**params)
    assert model.get_params()[next(iter(params))] == next(iter(params.values()))  # stored unmodified
    with pytest.raises(ValueError):
        model.fit(np.zeros((4, 2)), [0, 1, 0, 1])


def test_scikit_learn_estimator_checks_pass():
    """The checks test the API, not how much it learns: narrow layers keep them to seconds (the defaults take minutes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(SquaredLossMLP(hidden=(32, 32), epochs=30, learning_rate=0.5), on_fail=None)
    failed = {r["check_name"]: repr(r["exception"]) for r in results if r["status"] == "failed"}
    assert not failed


# ---------------------------------------------------------------- how much it learns


def test_learns_with_a_large_learning_rate():
    X, y = make_blobs(300, centers=3, n_features=5, random_state=1)
    model = SquaredLossMLP(hidden=(32, 32), epochs=30, learning_rate=0.5, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.9


def test_defaults_barely_move_from_uniform():
    l = 5
    X, y = make_classification(300, n_features=20, n_informative=5, n_classes=l, random_state=0)
    proba = SquaredLossMLP(random_state=0).fit(X, y).predict_proba(X)
    assert proba.max(axis=1).mean() < 1 / l + 0.25
