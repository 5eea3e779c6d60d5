"""ViPll: a Dirichlet posterior over each row's label, fitted by variational inference against a conditional VAE."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.datasets import make_classification

import pll
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError
from pll.methods._proden import Proden

torch = pytest.importorskip("torch", reason="ViPll needs the deep extra (PyTorch)")
from pll.methods._cvae import KL_SHARE, Cvae  # noqa: E402
from pll.methods._vi_pll import (  # noqa: E402
    INPUT_NOISE,
    LOG_EPS,
    ViPll,
    dirichlet_samples,
    max_entropy_prior,
    new_weights,
)
from pll.utils._mlp import BN_EPS, Perceptron  # noqa: E402

FAST = {"max_epochs": 5, "pretrain_epochs": 2, "n_importance": 2, "n_samples": 3, "batch_size": 16}


def blobs(n=90, n_classes=3, seed=0, n_features=5):
    return make_classification(
        n_samples=n, n_features=n_features, n_informative=4, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, random_state=seed,
    )


def partial(n=90, seed=0):
    X, y = blobs(n, seed=seed)
    return X, y, pll.noise.uniform(y, 3, p=1.0, r=1, random_state=seed)


# --- the method: the loss, the weights, the prior, by hand ------------------------------------------


def _softplus(v):
    return np.logaddexp(0.0, v)


def _hardsigmoid(v):
    return np.clip(v / 6 + 0.5, 0.0, 1.0)


def _perceptron_train_logits(net, Z):
    """A one-hidden-layer Perceptron's logits in training mode (batch statistics), in float64 numpy."""
    W1, b1, W2, b2, gamma, beta = (p.detach().numpy().astype(np.float64) for p in net._linear + net._norm)
    h = np.maximum(Z @ W1 + b1, 0.0)
    h = (h - h.mean(axis=0)) / np.sqrt(h.var(axis=0) + BN_EPS) * gamma + beta
    return h @ W2 + b2


def _cvae_numpy(cvae):
    return [tuple(t.detach().numpy().astype(np.float64) for t in pair) for pair in cvae.layers]


def test_the_step_minimises_the_authors_bound_computed_here_by_hand():
    """One batch through fixed networks and fixed draws: the loss the step returns, recomputed row by row in numpy."""
    B, d, l, K, M, latent, sigma = 6, 4, 3, 5, 4, 3, 0.3
    rng = np.random.default_rng(0)
    clf = ViPll(hidden_layer_sizes=(7,), n_samples=K, n_importance=M, latent_dim=latent, cvae_hidden=8,
                likelihood_weight=2.5, prior_weight=1.5)
    clf.networks_ = [Perceptron(d, l, (7,), np.random.default_rng(s)) for s in (1, 2)]
    clf.cvae_ = Cvae(d, l, latent, 8, np.random.default_rng(3))
    clf.sigma_ = sigma
    x = rng.random((B, d)).astype(np.float32)
    bags = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [1, 1, 1], [0, 0, 1], [1, 0, 1]], dtype=np.float32)
    weights = np.where(bags > 0, rng.uniform(0.1, 1.0, bags.shape), 0.0).astype(np.float32)
    weights /= weights.max(axis=1, keepdims=True)
    prior = np.array([0.5, 0.3, 0.2], dtype=np.float32)
    gen = torch.Generator().manual_seed(7)
    loss, alpha = clf._step(torch.tensor(x), torch.tensor(bags), torch.tensor(weights), torch.tensor(prior), gen)

    # the same draws, in the order the step documents
    g = torch.Generator().manual_seed(7)
    noise = [torch.randn((B, d), generator=g).numpy().astype(np.float64) for _ in range(2)]
    logits = 0.5 * sum(_perceptron_train_logits(net, x + INPUT_NOISE * e) for net, e in zip(clf.networks_, noise))
    a = 1 + _softplus(logits)
    np.testing.assert_allclose(alpha.detach().numpy(), a, rtol=1e-5)
    gam = torch._standard_gamma(alpha.detach().expand(K, B, l).contiguous(), generator=g).numpy().astype(np.float64)
    theta = gam / gam.sum(axis=-1, keepdims=True)  # Dirichlet(α) draws: normalised Gamma(α_c) draws
    eps_iw = torch.randn((M, B, l, latent), generator=g).numpy().astype(np.float64)
    eps_cvae = torch.randn((B, latent), generator=g).numpy().astype(np.float64)

    (E1, e1), (Em, em), (Ev, ev), (D1, d1), (D2, d2) = _cvae_numpy(clf.cvae_)
    log_lik = np.zeros((B, l))
    for i in range(B):
        for c in range(l):  # the authors' repeated rows: x_i with the one-hot label of class c
            y = np.eye(l)[c]
            h = np.maximum(np.concatenate([x[i], y]) @ E1 + e1, 0.0)
            mu, logvar = h @ Em + em, h @ Ev + ev
            w = []
            for k in range(M):
                z = mu + eps_iw[k, i, c] * np.exp(0.5 * logvar)
                recon = _hardsigmoid(np.maximum(np.concatenate([z, y]) @ D1 + d1, 0.0) @ D2 + d2)
                mse = np.mean((x[i] - recon) ** 2)
                log_p_x = -0.5 * (mse / sigma**2 + math.log(2 * math.pi * sigma**2))
                log_p_z = np.mean(-0.5 * (z**2 + math.log(2 * math.pi)))
                log_q_z = np.mean(-0.5 * ((z - mu) ** 2 / np.exp(logvar) + logvar + math.log(2 * math.pi)))
                w.append(log_p_x + KL_SHARE * (log_p_z - log_q_z))
            log_lik[i, c] = logsumexp(w) - math.log(M)
    per_row = []
    for i in range(B):
        terms = []
        for k in range(K):
            t = theta[k, i]
            terms.append(t @ np.log(t + LOG_EPS) - 1.5 * t @ np.log(prior + LOG_EPS) - 2.5 * t @ log_lik[i]
                         - t @ np.log(weights[i] + LOG_EPS))
        per_row.append(np.mean(terms))
    # the CVAE's own loss on the batch and its current weights, added to the networks' bound
    h = np.maximum(np.concatenate([x, weights], axis=1) @ E1 + e1, 0.0)
    mu, logvar = h @ Em + em, h @ Ev + ev
    z = mu + eps_cvae * np.exp(0.5 * logvar)
    recon = _hardsigmoid(np.maximum(np.concatenate([z, weights], axis=1) @ D1 + d1, 0.0) @ D2 + d2)
    cvae_loss = np.mean((recon - x) ** 2) - 0.5 * np.mean(1 + logvar - mu**2 - np.exp(logvar))
    np.testing.assert_allclose(float(loss.detach()), np.mean(per_row) + cvae_loss, rtol=2e-5)

    # the gradient reaches both networks and the CVAE, and log p(x | y) carries none: the CVAE's gradient is its loss's
    for net in clf.networks_:
        net.zero_grad()
    clf.cvae_.zero_grad()
    loss.backward()
    assert all(net.grads.abs().sum() > 0 for net in clf.networks_)
    cvae_grads = clf.cvae_.grads.clone()
    clf.cvae_.zero_grad()
    x_t, w_t = torch.tensor(x), torch.tensor(weights)
    clf.cvae_.loss(x_t, w_t, torch.tensor(eps_cvae, dtype=torch.float32))[0].backward()
    np.testing.assert_allclose(cvae_grads.numpy(), clf.cvae_.grads.numpy(), rtol=1e-4, atol=1e-7)


def test_dirichlet_samples_have_the_dirichlet_mean_and_a_gradient():
    alpha = torch.tensor([[1.5, 3.0, 0.5 + 1.0], [4.0, 1.0, 1.0]], requires_grad=True)
    s = dirichlet_samples(alpha, 20000, torch.Generator().manual_seed(0))
    assert s.shape == (20000, 2, 3)
    np.testing.assert_allclose(s.sum(dim=-1).detach().numpy(), 1.0, rtol=1e-5)
    mean = (alpha / alpha.sum(dim=1, keepdim=True)).detach().numpy()
    np.testing.assert_allclose(s.mean(dim=0).detach().numpy(), mean, atol=0.01)
    s[..., 0].mean().backward()  # d E[θ_0] / d α_0 > 0 for every row
    assert (alpha.grad[:, 0] > 0).all()


def test_the_weight_update_against_a_loop_over_rows():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n, l = rng.integers(1, 8), rng.integers(2, 6)
        alpha = 1 + rng.exponential(2.0, (n, l))
        bags = rng.random((n, l)) < 0.5
        bags[np.arange(n), rng.integers(0, l, n)] = True
        expected = np.zeros((n, l))
        for i in range(n):
            q = [alpha[i, c] / alpha[i].sum() for c in range(l)]
            w = [(q[c] + 1e-10) * bags[i, c] for c in range(l)]
            w = [v / sum(w) for v in w]
            expected[i] = [v / max(w) for v in w]
        np.testing.assert_allclose(new_weights(alpha, bags.astype(float)), expected, rtol=1e-12)
        got = new_weights(torch.tensor(alpha), torch.tensor(bags, dtype=torch.float64)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_the_training_leaves_each_rows_weights_on_its_bag():
    X, y, S = partial()
    clf = ViPll(**FAST, random_state=0).fit(X, S)
    np.testing.assert_allclose(clf.weights_.sum(axis=1), 1.0)
    assert (clf.weights_[~S.astype(bool)] == 0).all()


def _entropy(p):
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0))


def test_the_max_entropy_prior_meets_its_bounds_and_beats_every_other_feasible_point():
    rng = np.random.default_rng(0)
    for trial in range(30):
        n, l = rng.integers(5, 60), rng.integers(2, 8)
        bags = rng.random((n, l)) < rng.uniform(0.1, 0.7)
        bags[np.arange(n), rng.integers(0, l, n)] = True
        low = bags[bags.sum(axis=1) == 1].sum(axis=0) / n
        high = bags.sum(axis=0) / n
        p = max_entropy_prior(bags)
        assert abs(p.sum() - 1) < 1e-12 and (p >= low - 1e-9).all() and (p <= high + 1e-9).all()
        for _ in range(50):  # random feasible points: a point in the box, moved along it until it sums to 1
            v = rng.uniform(low, high)
            gap = 1 - v.sum()
            v = v + gap * ((high - v) / (high - v).sum() if gap > 0 else (v - low) / (v - low).sum())
            assert abs(v.sum() - 1) < 1e-9
            assert _entropy(p) >= _entropy(v) - 1e-9
        # and the authors' SLSQP finds no better point
        start = 0.5 * (low + high)
        res = minimize(lambda q: np.sum(q * np.log(np.clip(q, 1e-10, 1))), start / start.sum(),
                       bounds=list(zip(low, high)), constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1}])
        assert _entropy(p) >= -res.fun - 1e-6


# --- learning ---------------------------------------------------------------------------------------


def test_it_disambiguates_and_predicts():
    X, y = make_classification(n_samples=500, n_features=8, n_informative=6, n_redundant=0, n_classes=4,
                               n_clusters_per_class=1, class_sep=2.0, random_state=0)
    S = pll.noise.uniform(y, 4, p=1.0, r=1, random_state=0)
    clf = ViPll(max_epochs=20, pretrain_epochs=5, n_importance=2, random_state=0).fit(X[:400], S[:400])
    assert (clf.disambiguate().labels == y[:400]).mean() > 0.85
    assert (clf.predict(X[400:]) == y[400:]).mean() > 0.8
    P = clf.predict_proba(X[400:])
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert clf.fit_summary()["epochs"] == 20 and clf.n_pretrain_epochs_ == 5 and clf.losses_.shape == (20,)


def test_max_steps_caps_the_epochs_and_the_pretraining():
    X, y, S = partial(100)  # 6 steps of 16 rows an epoch
    clf = ViPll(**{**FAST, "max_epochs": 10, "pretrain_epochs": 10}, max_steps=20, random_state=0).fit(X, S)
    assert clf.n_epochs_ == 3 and clf.n_pretrain_epochs_ == 3


# --- seeds ------------------------------------------------------------------------------------------


def test_same_seed_same_model_other_seed_another():
    X, y, S = partial()
    a, b = (ViPll(**FAST, random_state=5).fit(X, S) for _ in range(2))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.weights_, b.weights_)
    other = ViPll(**FAST, random_state=6).fit(X, S)
    assert not np.array_equal(a.predict_proba(X), other.predict_proba(X))


# --- formats, odd bags, bad input: as Proden ----------------------------------------------------------


def test_every_candidate_set_format_gives_the_same_fit():
    X, y, S = partial(60)
    S = S.astype(bool)
    forms = [S, S.astype(int), sp.csr_matrix(S), [set(np.flatnonzero(r)) for r in S]]
    probas = [ViPll(**FAST, random_state=0).fit(X, s).predict_proba(X) for s in forms]
    for P in probas[1:]:
        np.testing.assert_array_equal(P, probas[0])
    labels = ViPll(**FAST, random_state=0).fit(X, y).predict_proba(X)
    one_hot = ViPll(**FAST, random_state=0).fit(X, np.eye(3, dtype=bool)[y]).predict_proba(X)
    np.testing.assert_array_equal(labels, one_hot)


def test_an_empty_bag_counts_as_every_class():
    X, y = blobs(60)
    S = np.eye(3, dtype=bool)[y]
    S[0] = False
    clf = ViPll(**FAST, random_state=0).fit(X, S)
    full = S.copy()
    full[0] = True
    ref = ViPll(**FAST, random_state=0).fit(X, full)
    np.testing.assert_array_equal(clf.weights_, ref.weights_)
    assert not clf.S_train_[0].any()


def test_a_class_in_no_bag_gets_probability_zero():
    X, y = blobs(60)
    S = np.zeros((60, 4), dtype=bool)
    S[np.arange(60), y] = True
    P = ViPll(**FAST, random_state=0).fit(X, S).predict_proba(X)
    assert P.shape == (60, 4) and (P[:, 3] == 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


def test_one_class_in_every_bag_predicts_it():
    X, _ = blobs(30)
    clf = ViPll(**FAST, random_state=0).fit(X, np.array(["a"] * 30))
    assert (clf.predict(X) == "a").all() and (clf.predict_proba(X) == 1.0).all()


def _error(call):
    with pytest.raises(Exception) as exc:
        call()
    return type(exc.value), str(exc.value)


def test_bad_data_gets_the_same_errors_as_proden():
    X, y = blobs(30)
    bad = X.copy()
    bad[3, 1] = np.nan
    for data in ((bad, y), (X, y[:20]), (X[:, :, None], y), (X, np.ones((30, 3, 2)))):
        (kind_v, msg_v), (kind_p, msg_p) = (_error(lambda cls=cls: cls().fit(*data)) for cls in (ViPll, Proden))
        assert kind_v is kind_p and issubclass(kind_v, InvalidDataError)
        assert msg_v.replace("ViPll", "<m>") == msg_p.replace("Proden", "<m>") and "\n" not in msg_v
    vi, pr = ViPll(**FAST).fit(X, y), Proden(max_epochs=2).fit(X, y)
    for call in (lambda c: c.predict(X[:, :3]),
                 lambda c: c.predict_with_reject(X, candidates=np.ones((30, 2), dtype=bool)),
                 lambda c: c.predict(bad)):
        (kind_v, msg_v), (kind_p, msg_p) = _error(lambda: call(vi)), _error(lambda: call(pr))
        assert kind_v is kind_p and msg_v.replace("ViPll", "<m>") == msg_p.replace("Proden", "<m>")


SAME_AS_PRODEN = {"max_epochs", "max_steps", "learning_rate", "alpha", "threshold", "random_state", "hidden_layer_sizes",
                  "device"}


@pytest.mark.parametrize(
    "params, match",
    [
        ({"max_epochs": 0}, "'max_epochs'"),
        ({"max_steps": 0}, "'max_steps'"),
        ({"pretrain_epochs": -1}, "'pretrain_epochs'"),
        ({"likelihood_weight": -1.0}, "'likelihood_weight'"),
        ({"prior_weight": -0.5}, "'prior_weight'"),
        ({"learning_rate": 0.0}, "'learning_rate'"),
        ({"alpha": -1.0}, "'alpha'"),
        ({"batch_size": 1}, "'batch_size'"),
        ({"batch_size": True}, "'batch_size'"),
        ({"n_samples": 0}, "'n_samples'"),
        ({"n_importance": 0}, "'n_importance'"),
        ({"hidden_layer_sizes": (0,)}, "'hidden_layer_sizes'"),
        ({"threshold": 1.5}, "'threshold'"),
        ({"random_state": -1}, "'random_state'"),
        ({"device": "tpu"}, "device='tpu'"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, match):
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match=match) as vi:
        ViPll(**params).fit(X, y)
    if set(params) <= SAME_AS_PRODEN:  # a parameter Proden has with the same constraint: its very message
        with pytest.raises(InvalidParameterError) as pr:
            Proden(**params).fit(X, y)
        assert str(vi.value).replace("ViPll", "<m>") == str(pr.value).replace("Proden", "<m>")
        assert "\n" not in str(vi.value)


@pytest.mark.parametrize("call", [lambda c, X: c.predict(X), lambda c, X: c.predict_with_reject(X),
                                  lambda c, X: c.conformity(X), lambda c, X: c.disambiguate()])
def test_not_fitted(call):
    with pytest.raises(NotFittedError, match="ViPll is not fitted"):
        call(ViPll(), np.zeros((2, 3)))


# --- reject option, pickling, progress ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    X, y, S = partial(150)
    return ViPll(**{**FAST, "max_epochs": 15}, random_state=0).fit(X[:120], S[:120]), X[120:], y[120:]


def test_the_reject_option_is_the_base_classs(fitted):
    clf, X, y = fitted
    P = clf.predict_proba(X)
    r = clf.predict_with_reject(X)
    assert clf.threshold == 0.9 and clf.conflict_margin == 0.2
    np.testing.assert_array_equal(r.labels, P.argmax(axis=1))
    np.testing.assert_allclose(r.score, P.max(axis=1))
    np.testing.assert_array_equal(r.accept, r.score >= 0.9)
    np.testing.assert_array_equal(r.reason == "none", r.accept)
    assert set(r.reason) <= {"none", "conflict", "low_score"}
    np.testing.assert_allclose(clf.decision_function(X), r.score)
    np.testing.assert_allclose(clf.conformity(X), P)
    strict = pickle.loads(pickle.dumps(clf)).set_params(threshold=0.5)
    np.testing.assert_array_equal(strict.predict_with_reject(X).accept, r.score >= 0.5)
    inside = clf.predict_with_reject(X, candidates=[{0, 2}] * len(X))
    assert set(inside.labels) <= {0, 2}
    d = clf.disambiguate()
    assert all(clf.S_train_[i, d.labels[i]] for i in range(len(d.labels)))


def test_pickling_round_trips(fitted):
    clf, X, _ = fitted
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    np.testing.assert_array_equal(back.weights_, clf.weights_)
    assert back.cvae_.params.dtype == torch.float32 and back.sigma_ == clf.sigma_


def test_progress_lines_cover_the_pretraining_and_the_training():
    from pll.utils.progress import reporting

    X, y, S = partial(60)
    lines = []
    with reporting(lambda p: lines.append(str(p)), min_rows=0, every_seconds=0.0):
        ViPll(**FAST, random_state=0).fit(X, S)
    assert any("p(x|y) pretraining (rows x 2 epochs)" in line and "done" in line for line in lines), lines
    assert any("ViPll networks (rows x 5 epochs)" in line and "done" in line for line in lines), lines
