"""Noise models: their statistics on 20 000 rows against each model's expectation.

Tolerances are 5 binomial standard errors of the statistic (for a mean of
independent per-row variables: sqrt(sum of variances) / n), so a correct
model fails with probability below 1e-6 per check.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.datasets import make_blobs, make_classification
from sklearn.linear_model import LogisticRegression

from pll import noise
from pll.data import PartialLabelDataset, one_hot
from pll.errors import InvalidDataError, InvalidParameterError

N = 20_000
Z = 5.0


def assert_close(observed, expected, se):
    assert abs(observed - expected) <= Z * se, f"observed {observed:.5f}, expected {expected:.5f} +- {Z} x {se:.5f}"


def labels(n=N, l=10, seed=0):
    return np.random.default_rng(seed).integers(0, l, size=n)


# ---------------------------------------------------------------- uniform


def test_uniform_statistics():
    l, p, r = 10, 0.7, 3
    y = labels(l=l)
    S = noise.uniform(y, l, p=p, r=r, random_state=1)
    sizes = S.sum(axis=1)
    assert S[np.arange(N), y].all()  # the true label is never missing
    assert set(np.unique(sizes)) == {1, 1 + r}  # r distinct wrong labels, or none
    assert_close(sizes.mean(), 1 + p * r, r * np.sqrt(p * (1 - p) / N))
    partial = sizes > 1
    for c in range(l):  # each wrong label equally likely: r / (l - 1) among partial rows of other classes
        rows = partial & (y != c)
        share = r / (l - 1)
        assert_close(S[rows, c].mean(), share, np.sqrt(share * (1 - share) / rows.sum()))


def test_uniform_caps_r_with_a_warning():
    with pytest.warns(UserWarning, match="r=9 exceeds the 3 wrong labels"):
        S = noise.uniform(labels(n=100, l=4), 4, p=1.0, r=9, random_state=0)
    assert S.all()


def test_row_keyed_randomness_does_not_depend_on_the_other_rows():
    y = labels(n=1000)
    for model in (noise.uniform, noise.class_dependent):
        full = model(y, 10, random_state=3)
        np.testing.assert_array_equal(model(y[:300], 10, random_state=3), full[:300])
        np.testing.assert_array_equal(model(y, 10, random_state=3), full)
        assert not np.array_equal(model(y, 10, random_state=4), full)


# ---------------------------------------------------------------- class-dependent


@pytest.mark.parametrize("l", [10, 7])
def test_class_dependent_statistics(l):
    p, eps = 0.7, 0.7
    y = labels(l=l)
    S = noise.class_dependent(y, l, p=p, eps=eps, r=1, random_state=2)
    partner = noise.partner_classes(l, 2)
    sizes = S.sum(axis=1)
    assert S[np.arange(N), y].all() and set(np.unique(sizes)) == {1, 2}
    assert_close((sizes == 2).mean(), p, np.sqrt(p * (1 - p) / N))
    partial = sizes == 2
    paired = partial & (partner[y] >= 0)
    hits = S[np.flatnonzero(paired), partner[y[paired]]]
    assert_close(hits.mean(), eps, np.sqrt(eps * (1 - eps) / hits.size))  # how often the partner is added
    other = (1 - eps) / (l - 2)
    for c in range(l):  # a specific non-partner wrong label
        rows = paired & (y != c) & (partner[y] != c)
        assert_close(S[rows, c].mean(), other, np.sqrt(other * (1 - other) / rows.sum()))
    if l % 2:  # the class without partner draws uniformly
        lone = partial & (partner[y] < 0)
        c = (y[lone][0] + 1) % l
        assert_close(S[lone, c].mean(), 1 / (l - 1), np.sqrt((1 / (l - 1)) * (1 - 1 / (l - 1)) / lone.sum()))


def test_class_dependent_without_replacement_matches_successive_sampling():
    # r = 2: the partner is drawn first (prob eps) or second (prob sum_j w_j * eps / (1 - w_j)).
    l, eps = 6, 0.4
    y = labels(l=l)
    S = noise.class_dependent(y, l, p=1.0, eps=eps, r=2, random_state=5)
    partner = noise.partner_classes(l, 5)
    assert (S.sum(axis=1) == 3).all()
    w = (1 - eps) / (l - 2)
    expected = eps + (l - 2) * w * eps / (1 - w)
    hits = S[np.arange(N), partner[y]]
    assert_close(hits.mean(), expected, np.sqrt(expected * (1 - expected) / N))


def test_class_dependent_raises_eps_to_one_over_l_minus_one():
    l = 3
    y = labels(l=l)
    S = noise.class_dependent(y, l, p=1.0, eps=0.1, random_state=0)
    partner = noise.partner_classes(l, 0)
    paired = partner[y] >= 0
    hits = S[np.flatnonzero(paired), partner[y[paired]]]
    assert_close(hits.mean(), 0.5, np.sqrt(0.25 / hits.size))


@given(st.integers(3, 40), st.integers(0, 2**31))
def test_partner_classes_is_a_random_pairing(l, seed):
    partner = noise.partner_classes(l, seed)
    paired = np.flatnonzero(partner >= 0)
    assert (partner[partner[paired]] == paired).all() and (partner[paired] != paired).all()
    assert (partner < 0).sum() == l % 2


# ---------------------------------------------------------------- instance-dependent


def _oracle_flip_probabilities(proba, y):
    q = np.zeros_like(proba)
    for i in range(proba.shape[0]):
        top = max(proba[i, c] for c in range(proba.shape[1]) if c != y[i])
        xi = [0.0 if c == y[i] or top == 0 else proba[i, c] / top for c in range(proba.shape[1])]
        mean = sum(xi) / len(xi)
        q[i] = [min(1.0, 0.3 * v / mean) if mean > 0 else 0.0 for v in xi]
    return q


def test_instance_flip_probabilities_match_the_definition():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(6, 0.3), size=200)
    proba[:5] = np.eye(6)[[0, 1, 2, 3, 4]]  # a certain classifier: xi is 0 for the other labels
    y = rng.integers(0, 6, size=200)
    y[:5] = [0, 1, 2, 3, 4]
    q = noise.instance_flip_probabilities(proba, y)
    np.testing.assert_allclose(q, _oracle_flip_probabilities(proba, y), atol=1e-12)
    assert (q[:5] == 0).all() and (q[np.arange(200), y] == 0).all()


def test_instance_dependent_statistics():
    X, y = make_classification(n_samples=N, n_features=8, n_informative=6, n_classes=5, random_state=0)
    estimator = LogisticRegression(max_iter=500)
    S = noise.instance_dependent(X, y, 5, random_state=4, estimator=estimator)
    q = noise.instance_flip_probabilities(noise.class_probabilities(X, y, 5, estimator), y)
    assert S[np.arange(N), y].all()
    sizes = S.sum(axis=1)
    assert_close(sizes.mean(), 1 + q.sum(axis=1).mean(), np.sqrt((q * (1 - q)).sum()) / N)
    for low, high in [(0, 0.2), (0.2, 0.5), (0.5, 1.01)]:  # confusable labels join more often, as q says
        cells = (q >= low) & (q < high)
        cells[np.arange(N), y] = False
        assert_close(S[cells].mean(), q[cells].mean(), np.sqrt((q[cells] * (1 - q[cells])).sum()) / cells.sum())


def test_instance_dependent_default_network_runs():
    X, y = make_classification(n_samples=300, n_features=5, n_informative=4, n_redundant=0, n_classes=4, random_state=1)
    S = noise.instance_dependent(X, y, 4, random_state=0)
    assert S.shape == (300, 4) and S[np.arange(300), y].all() and S.sum() > 300


# ---------------------------------------------------------------- cluster-dependent


def test_cluster_bags_statistics():
    l, k, nu = 8, 5, 0.3
    rng = np.random.default_rng(7)
    y = labels(l=l)
    clusters = rng.integers(0, k, size=N)
    alpha = noise.cluster_alpha(k, l, 7)
    assert alpha.shape == (k, l) and (alpha >= 0).all() and (alpha <= 0.8).all()
    S = noise.cluster_bags(y, l, clusters, alpha, nu=nu, random_state=7)
    a_true = alpha[clusters, y]
    a_wrong = (alpha[clusters].sum(axis=1) - a_true) / (l - 1)  # mean alpha over a random wrong anchor
    a_wrong_sq = ((alpha[clusters] ** 2).sum(axis=1) - a_true**2) / (l - 1)
    # bag size = 1 + Binomial(l - 1, a) with a = alpha[cluster, anchor]
    mean_a = (1 - nu) * a_true + nu * a_wrong
    mean_a_sq = (1 - nu) * a_true**2 + nu * a_wrong_sq
    variance = (l - 1) * (mean_a - mean_a_sq) + (l - 1) ** 2 * (mean_a_sq - mean_a**2)
    assert_close(S.sum(axis=1).mean(), 1 + (l - 1) * mean_a.mean(), np.sqrt(variance.sum()) / N)
    # the true label is missing when the anchor is wrong and it does not join
    missing = nu * (1 - a_wrong)
    assert_close((~S[np.arange(N), y]).mean(), missing.mean(), np.sqrt((missing * (1 - missing)).sum()) / N)
    assert S.any(axis=1).all()  # the anchor always joins


def test_cluster_bags_without_nu_keep_the_true_label_and_add_labels_at_rate_alpha():
    l, k = 6, 4
    y = labels(l=l)
    clusters = np.random.default_rng(1).integers(0, k, size=N)
    alpha = noise.cluster_alpha(k, l, 1)
    S = noise.cluster_bags(y, l, clusters, alpha, nu=0.0, random_state=1)
    assert S[np.arange(N), y].all()
    wrong = ~one_hot(y, l)
    a = np.broadcast_to(alpha[clusters, y][:, None], S.shape)[wrong]  # partner label joins with alpha
    assert_close(S[wrong].mean(), a.mean(), np.sqrt((a * (1 - a)).sum()) / a.size)


def test_cluster_dependent_is_kmeans_then_cluster_bags():
    X, y = make_blobs(n_samples=2000, centers=5, n_features=3, random_state=0)
    y = np.random.default_rng(0).integers(0, 6, size=2000)
    S = noise.cluster_dependent(X, y, 6, n_clusters=5, nu=0.2, random_state=9)
    clusters = noise.cluster_assignments(X, 5, 9)
    assert np.unique(clusters).size == 5
    expected = noise.cluster_bags(y, 6, clusters, noise.cluster_alpha(5, 6, 9), nu=0.2, random_state=9)
    np.testing.assert_array_equal(S, expected)


# ---------------------------------------------------------------- true-label removal


def test_remove_true_label_statistics():
    l, nu = 10, 0.3
    y = labels(l=l)
    before = noise.uniform(y, l, random_state=0)
    after = noise.remove_true_label(before, y, nu, random_state=6)
    removed = ~after[np.arange(N), y]
    assert_close(removed.mean(), nu, np.sqrt(nu * (1 - nu) / N))
    changed = before != after
    assert changed.sum() == removed.sum() and changed[np.arange(N), y].sum() == removed.sum()
    empty = ~after.any(axis=1)
    assert (before[empty].sum(axis=1) == 1).all() and empty.sum() > 0
    assert before.sum() > after.sum()  # the input is not modified in place
    np.testing.assert_array_equal(before, noise.uniform(y, l, random_state=0))


# ---------------------------------------------------------------- the pipeline entry point


def _labelled(n=600, l=5):
    X, y = make_blobs(n_samples=n, centers=l, n_features=2, random_state=0)
    return PartialLabelDataset(X, one_hot(y, l), y, [f"c{i}" for i in range(l)], "blobs")


def test_apply_noise_dispatches_every_model_and_flags_noisy_bags():
    ds = _labelled()
    assert noise.apply_noise(ds, "auto", random_state=0).info["noise"] == "class_dependent"
    assert noise.apply_noise(noise.apply_noise(ds, "uniform"), "auto").info["noise"] == "none"
    for model in noise.NOISE_MODELS:
        params = {"nu": 0.5} if model in ("cluster_dependent", "remove_true_label") else {}
        if model == "instance_dependent":
            params = {"estimator": LogisticRegression()}
        out = noise.apply_noise(ds, model, params, random_state=1)
        assert out.info["noise"] == model and out.S.shape == ds.S.shape
    out = noise.apply_noise(ds, "remove_true_label", {"nu": 0.5}, random_state=1)
    summary = out.summary()
    assert summary["true_label_outside_bag"] > 200 and summary["empty_bags"] == summary["true_label_outside_bag"]


def test_apply_noise_rejects_bad_requests():
    ds = _labelled()
    with pytest.raises(InvalidParameterError, match="unknown noise model 'gaussian'"):
        noise.apply_noise(ds, "gaussian")
    with pytest.raises(InvalidParameterError, match="noise model 'uniform'.*'q'"):
        noise.apply_noise(ds, "uniform", {"q": 1})
    with pytest.raises(InvalidParameterError, match="noise model 'none' takes no parameters"):
        noise.apply_noise(ds, "none", {"p": 1})
    unlabelled = PartialLabelDataset(ds.X, ds.S, None, ds.classes, "u")
    with pytest.raises(InvalidDataError, match="u: noise model 'uniform' needs true labels"):
        noise.apply_noise(unlabelled, "uniform")
    with pytest.raises(InvalidParameterError, match="p must be in"):
        noise.uniform(ds.y, 5, p=1.5)
    with pytest.raises(InvalidParameterError, match="at least three classes"):
        noise.uniform([0, 1], 2)
    with pytest.raises(InvalidDataError, match="true label 7 at row 1"):
        noise.uniform([0, 7], 5)
    with pytest.raises(InvalidParameterError, match="r must be 1"):
        noise.class_dependent(ds.y, 5, eps=1.0, r=2)
