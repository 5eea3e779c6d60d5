"""The audit's cross-fitted learners: a row never judges itself, the mixture and the reasons match their definitions,
and planted wrong bags are found better than by the neighbor vote and by confident learning."""

import numpy as np
import pytest
from sklearn.datasets import make_classification

pytest.importorskip("torch", reason="the audit's default learners are PRODEN networks: the deep extra (PyTorch)")

import pll  # noqa: E402
from pll.audit import (
    audit_bags,
    cross_fitted_proba,
    majority_disagreement,
    mixture_weights,
    neighbor_support,
    precision_at_top,
    ranking_auc,
)
from pll.errors import InvalidDataError, InvalidParameterError
from pll.neighbors import kneighbors
from pll.preprocessing import make_features


def tiny_learner(seed=0):
    """A PRODEN network small enough for many fits in a test."""
    return pll.Proden(hidden_layer_sizes=(16,), max_epochs=5, random_state=seed)


def planted(n=600, features=8, classes=5, nu=0.15, seed=0, informative=6):
    """Features, bags (uniform noise) with a share ``nu`` replaced by bags that miss their true label, truth."""
    X, y = make_classification(n, features, n_informative=informative, n_redundant=1, n_classes=classes,
                               n_clusters_per_class=1, class_sep=1.0, random_state=seed)
    S = pll.noise.remove_true_label(pll.noise.uniform(y, classes, random_state=seed), y, nu, random_state=seed)
    rng = np.random.default_rng(seed)
    for i in np.flatnonzero(~S.any(axis=1)):  # an emptied bag gets one wrong label: found only from evidence
        S[i, rng.choice([c for c in range(classes) if c != y[i]])] = True
    return make_features("minmax").fit_transform(X), S, y


def by_row(table, column):
    out = np.empty(len(table))
    out[table["row"].to_numpy()] = table[column].to_numpy()
    return out


# ------------------------------------------------------------------ cross-fitting


def test_a_rows_cross_fitted_probabilities_do_not_depend_on_its_own_bag():
    X, S, _ = planted(n=120, seed=1)
    before = cross_fitted_proba(X, S, tiny_learner(), n_folds=4, random_state=3)
    np.testing.assert_allclose(before.sum(axis=1), 1.0)
    rng = np.random.default_rng(0)
    for row in (0, 57, 119):
        changed = S.copy()
        changed[row] = rng.random(S.shape[1]) < 0.5
        changed[row, 0] = not S[row, 0]  # a different bag, whatever the draw
        after = cross_fitted_proba(X, changed, tiny_learner(), n_folds=4, random_state=3)
        assert np.array_equal(after[row], before[row])  # bit for bit
        # ... while the rows of the other folds, whose fits saw it, may move: the learner is not blind to it.
        assert not np.array_equal(after, before)


def test_an_audit_row_moves_only_through_its_bag_and_the_two_mixture_weights():
    """With the weights held as fitted, the suspicion of a changed row is 1 - its unchanged mixture inside the new bag."""
    X, S, _ = planted(n=120, seed=2)
    nb = kneighbors(X, None, k=10)
    learner = tiny_learner()
    P = cross_fitted_proba(X, S, learner, n_folds=4, random_state=0)
    support = neighbor_support(S, nb)
    row = 7
    changed = S.copy()
    changed[row] = ~S[row]
    changed[row, 0] = True  # never empty
    table = audit_bags(X, changed, neighbors=nb, learners=[learner], n_folds=4, random_state=0)
    w = table.attrs["mixture_weights"]
    mixed = w["learner_1"] * P[row] + w["neighbors"] * support[row]
    assert by_row(table, "suspicion")[row] == pytest.approx(1.0 - mixed[changed[row]].sum(), abs=1e-12)


# ------------------------------------------------------------------ the mixture


def bag_log_likelihood(w, sources, bags):
    inside = sum(wi * np.where(bags, P, 0.0).sum(axis=1) for wi, P in zip(w, sources))
    return np.log(inside[bags.any(axis=1)]).mean()


def test_mixture_weights_maximise_the_bags_likelihood_over_a_fine_grid():
    rng = np.random.default_rng(5)
    n, l = 300, 4
    y = rng.integers(0, l, n)
    bags = np.eye(l, dtype=bool)[y] | (rng.random((n, l)) < 0.2)
    sharp = np.full((n, l), 0.05) + 0.8 * np.eye(l)[y]  # right most of the time
    sharp[:40] = 0.25  # ... and unsure on some rows
    vague = rng.dirichlet(np.ones(l), n)
    sources = [sharp / sharp.sum(axis=1, keepdims=True), vague]
    w = mixture_weights(sources, bags)
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    grid = [bag_log_likelihood((a, 1 - a), sources, bags) for a in np.linspace(0, 1, 1001)]
    assert bag_log_likelihood(w, sources, bags) >= max(grid) - 1e-9
    assert w[0] > 0.5  # the sharper source explains the bags better
    assert mixture_weights([sources[0]], bags).tolist() == [1.0]


def test_neighbors_alone_give_the_neighbor_support_and_no_learner_columns():
    X, S, _ = planted(n=80, seed=3)
    table = audit_bags(X, S, learners=None)
    assert table.attrs["mixture_weights"] == {"neighbors": 1.0}
    np.testing.assert_array_equal(table["suspicion"], table["neighbor_suspicion"])
    assert table["learner_suspicion"].isna().all()


# ------------------------------------------------------------------ reasons


def test_the_favoured_labels_and_reasons_match_a_loop_over_the_mixed_probabilities():
    X, S, _ = planted(n=150, classes=6, seed=4)
    S[3] = False  # an empty bag: every label is outside
    S[4] = True  # a bag of every label: none is
    nb = kneighbors(X, None, k=10)
    learner = tiny_learner()
    names = ["a", "b", "c", "d", "e", "f"]
    table = audit_bags(X, S, neighbors=nb, learners=[learner], n_folds=3, random_state=1, classes=names)
    w = table.attrs["mixture_weights"]
    P = (w["learner_1"] * cross_fitted_proba(X, S, learner, n_folds=3, random_state=1)
         + w["neighbors"] * neighbor_support(S, nb))
    for r in table.itertuples():
        p = P[r.row]
        outside = [c for c in range(6) if not S[r.row, c]]
        top = max((p[c] for c in outside), default=0.0)
        expected = sorted((c for c in outside if p[c] >= 0.5 * top), key=lambda c: (-p[c], c))
        assert r.favoured == "|".join(names[c] for c in expected)
        assert r.reason == ", ".join(f"{names[c]} {p[c]:.2f}" for c in expected)
        assert r.best_out == pytest.approx(top, abs=1e-12)
        assert r.suspicion == pytest.approx(1.0 if not S[r.row].any() else 1.0 - p[S[r.row]].sum(), abs=1e-12)
    assert table.loc[table["row"] == 4, "favoured"].item() == ""
    assert len(table.loc[table["row"] == 3, "favoured"].item()) > 0


# ------------------------------------------------------------------ planted wrong bags


@pytest.fixture(scope="module")
def flare(shared_data):
    """flare (UCI, 1,389 rows) with class-dependent bags, 15 % replaced by bags that miss their true label;
    the audit's and confident learning's cross-fitted probabilities (PRODEN's defaults, 3 folds)."""
    ds = pll.load_dataset(str(shared_data / "uci" / "flare.arff"))
    S = pll.noise.remove_true_label(pll.noise.class_dependent(ds.y, ds.n_classes, random_state=0), ds.y, 0.15,
                                    random_state=0)
    rng = np.random.default_rng(0)
    for i in np.flatnonzero(~S.any(axis=1)):  # an emptied bag gets one wrong label: found only from evidence
        S[i, rng.choice([c for c in range(ds.n_classes) if c != ds.y[i]])] = True
    X = make_features("minmax").fit_transform(ds.X)
    wrong = ~S[np.arange(ds.n_rows), ds.y]
    P = cross_fitted_proba(X, S, pll.Proden(random_state=0), n_folds=3, random_state=0)
    return X, S, wrong, P, by_row(audit_bags(X, S), "suspicion")


def test_planted_wrong_bags_are_found_better_than_by_the_vote_and_by_confident_learning(flare):
    X, S, wrong, P, audit = flare
    vote = majority_disagreement(X, S)
    confident = 1.0 - np.where(S, P, 0.0).max(axis=1)  # confident learning's self-confidence on the bags
    best_precision = max(precision_at_top(s, wrong, 0.1) for s in (vote, confident))
    assert precision_at_top(audit, wrong, 0.1) >= best_precision + 0.05
    assert ranking_auc(audit, wrong) > max(ranking_auc(s, wrong) for s in (vote, confident))


def test_the_audit_ranks_better_than_cleanlabs_find_label_issues(flare):
    """The reference of the field, on the same out-of-fold probabilities (the test extra installs cleanlab)."""
    filters = pytest.importorskip("cleanlab.filter")
    X, S, wrong, P, audit = flare
    issues = filters.find_label_issues(np.where(S, P, -1.0).argmax(axis=1), P)
    cleanlab = issues + 0.5 * (1.0 - np.where(S, P, 0.0).max(axis=1))  # flagged first, then by self-confidence
    assert precision_at_top(audit, wrong, 0.1) > precision_at_top(cleanlab, wrong, 0.1)
    assert ranking_auc(audit, wrong) > ranking_auc(cleanlab, wrong)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"learners": "proden"}, InvalidParameterError, "learners must be 'auto', None or a sequence"),
        ({"learners": 3}, InvalidParameterError, "learners must be 'auto', None or a sequence"),
        ({"learners": [object()]}, InvalidParameterError, "a learner needs fit"),
        ({"n_folds": 1}, InvalidParameterError, "n_folds must be between 2 and the 6 rows"),
        ({"n_folds": 7}, InvalidParameterError, "n_folds must be between 2 and the 6 rows"),
        ({"n_folds": 2.5}, InvalidParameterError, "n_folds"),
    ],
)
def test_bad_learner_parameters_are_named(kwargs, error, match):
    X = np.arange(12.0).reshape(6, 2)
    S = np.eye(3, dtype=bool)[[0, 1, 2, 0, 1, 2]]
    with pytest.raises(error, match=match):
        audit_bags(X, S, n_neighbors=2, **{"learners": [tiny_learner()], **kwargs})


def test_learners_need_features_and_some_bag_to_learn_from():
    X = np.arange(12.0).reshape(6, 2)
    S = np.eye(3, dtype=bool)[[0, 1, 2, 0, 1, 2]]
    with pytest.raises(InvalidDataError, match="the learners need the features"):
        audit_bags(None, S, neighbors=kneighbors(X, None, k=2), n_neighbors=2, learners=[tiny_learner()])
    with pytest.raises(InvalidDataError, match="a learner needs the features"):
        cross_fitted_proba(None, S, tiny_learner())
    empty = np.zeros((6, 3), dtype=bool)
    with pytest.raises(InvalidDataError, match="every other row's bag is empty"):
        cross_fitted_proba(X, empty, tiny_learner(), n_folds=2)
