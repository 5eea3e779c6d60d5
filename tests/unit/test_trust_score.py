"""Trust scores against a brute-force numpy oracle over all pairwise distances."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

import pll
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError
from tests.oracles import distances, nearest


def oracle_kept(X, y, k, alpha, filtering):
    """Algorithm 1 (per class) or the uncertainty filter, from all pairwise distances."""
    n = X.shape[0]
    if filtering == "none" or alpha == 0:
        return np.ones(n, dtype=bool)
    keep = np.zeros(n, dtype=bool)
    if filtering == "density":
        D = distances(X, X)
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            kk = min(k, rows.size)
            # Radius of the smallest ball holding kk points of the class, the point itself counted.
            r = np.sort(D[np.ix_(rows, rows)], axis=1)[:, kk - 1]
            keep[rows] = r <= np.percentile(r, 100 * (1 - alpha))
        return keep
    kk = min(k, n)
    others = nearest(X, None, kk - 1)[0]
    share = (1 + (y[others] == y[:, None]).sum(axis=1)) / kk
    return share >= np.percentile(share, 100 * alpha)


def oracle_scores(X, y, n_classes, kept, Xq, pred, min_dist, training=False):
    D = distances(Xq, X)
    if training:
        np.fill_diagonal(D, np.inf)  # a training row is not in its own class set
    dist = np.full((Xq.shape[0], n_classes), np.inf)
    for c in range(n_classes):
        members = kept & (y == c)
        if members.any():
            dist[:, c] = D[:, members].min(axis=1)
    scores, closest = [], []
    for i, p in enumerate(pred):
        other = [(dist[i, c], c) for c in range(n_classes) if c != p]
        d_other, c_other = min(other)
        closest.append(c_other)
        scores.append(0.0 if np.isinf(dist[i, p]) else d_other / (dist[i, p] + min_dist))
    return np.array(scores), np.array(closest)


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(1, 40))
    d = draw(st.integers(1, 3))
    n_classes = draw(st.integers(2, 5))
    integer = draw(st.booleans())  # integer features: duplicates and exactly tied distances
    X = rng.integers(0, 4, size=(n, d)).astype(float) if integer else rng.normal(size=(n, d))
    y = rng.integers(0, n_classes, size=n)
    Q = rng.integers(0, 4, size=(draw(st.integers(1, 10)), d)).astype(float) if integer else rng.normal(size=(7, d))
    pred = rng.integers(0, n_classes, size=Q.shape[0])
    members = None if draw(st.booleans()) else rng.random(n) < 0.7
    params = dict(
        k=draw(st.integers(1, 12)),
        alpha=draw(st.sampled_from([0.0, 0.1, 0.35, 0.8])),
        filtering=draw(st.sampled_from(["none", "density", "uncertainty"])),
        min_dist=draw(st.sampled_from([1e-12, 0.5])),
    )
    return X, y, n_classes, Q, pred, members, params, integer


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_scores_match_the_brute_force_oracle(case):
    X, y, n_classes, Q, pred, members, params, integer = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = pll.TrustScore(**params).fit(X, y, classes=np.arange(n_classes), members=members)
    eligible = np.ones(X.shape[0], bool) if members is None else members
    kept = np.zeros(X.shape[0], bool)
    if eligible.any():  # the filter sees the eligible rows only
        kept[eligible] = oracle_kept(X[eligible], y[eligible], params["k"], params["alpha"], params["filtering"])
    assert np.array_equal(ts.kept_, kept)
    same = np.testing.assert_array_equal if integer else lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12)
    want, want_closest = oracle_scores(X, y, n_classes, kept, Q, pred, params["min_dist"])
    got, got_closest = ts.score(Q, pred, return_closest=True)
    same(got, want)
    if integer:  # continuous data has no ties; rounding may only reorder exact ties
        assert np.array_equal(got_closest, want_closest)
    train_pred = (y + 1) % n_classes
    want, want_closest = oracle_scores(X, y, n_classes, kept, X, train_pred, params["min_dist"], training=True)
    got, got_closest = ts.score_training(train_pred, return_closest=True)
    same(got, want)
    if integer:
        assert np.array_equal(got_closest, want_closest)
    want_own, _ = oracle_scores(X, y, n_classes, kept, X, y, params["min_dist"], training=True)
    same(ts.score_training(), want_own)


def test_distances_to_each_class_set():
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(200, 4)), rng.integers(0, 3, 200)
    Q = rng.normal(size=(50, 4))
    ts = pll.TrustScore().fit(X, y)
    want = np.stack([distances(Q, X[y == c]).min(axis=1) for c in range(3)], axis=1)
    np.testing.assert_allclose(ts.distances(Q), want, rtol=1e-12)


def test_empty_class_is_infinitely_far_and_warned():
    X = np.array([[0.0], [1.0], [5.0], [6.0]])
    with pytest.warns(UserWarning, match=r"class\(es\) 2 have no points"):
        ts = pll.TrustScore().fit(X, [0, 0, 1, 1], classes=[0, 1, 2])
    score, closest = ts.score(np.array([[0.5], [0.5]]), [2, 0], return_closest=True)
    assert score[0] == 0.0  # predicting a class without support is never trusted
    assert score[1] == pytest.approx(4.5 / 0.5) and closest[1] == 1  # the empty class is never nearest
    assert np.isinf(ts.distances(np.array([[0.5]]))[0, 2])


def test_density_filter_can_empty_a_class_only_with_a_warning_free_fit_otherwise():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 5, [[50.0, 50.0]]])
    y = np.r_[np.zeros(100, int), np.ones(100, int), 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ts = pll.TrustScore(alpha=0.1, filtering="density").fit(X, y)
    assert not ts.kept_[-1]  # the outlier is filtered
    assert 0.88 <= ts.kept_[:100].mean() <= 0.92
    # A point far from class 0's dense core trusts class 0 less after filtering.
    far = np.array([[50.0, 50.0]])
    assert ts.score(far, [0]) < pll.TrustScore().fit(X, y).score(far, [0])


def test_duplicates_across_classes_are_warned_and_score_zero():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 3.0], [4.0, 4.0]])
    with pytest.warns(UserWarning, match="2 kept training rows repeat the features of a row with another label"):
        ts = pll.TrustScore().fit(X, [0, 1, 1, 0])
    assert ts.score(np.array([[0.0, 0.0]]), [0])[0] == 0.0
    # Scoring training rows excludes each row by index, not by distance: the duplicate stays.
    assert ts.score_training()[0] == 0.0


def test_same_class_duplicates_do_not_warn_and_count_as_neighbors():
    X = np.array([[0.0], [0.0], [2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ts = pll.TrustScore(min_dist=1e-6).fit(X, [0, 0, 1])
    assert ts.score_training()[0] == pytest.approx(2.0 / 1e-6)


def test_works_with_a_scikit_learn_classifier_and_string_labels():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 3])
    y = np.array(["cat"] * 100 + ["dog"] * 100)
    clf = LogisticRegression().fit(X, y)
    ts = pll.TrustScore().fit(X, y)
    Q = rng.normal(size=(100, 2)) * 2 + 1.5
    pred = clf.predict(Q)
    score, closest = ts.score(Q, pred, return_closest=True)
    assert set(closest) <= {"cat", "dog"} and (closest != pred).all()
    # Flipping every prediction inverts every score (two classes, min_dist negligible).
    np.testing.assert_allclose(ts.score(Q, np.where(pred == "cat", "dog", "cat")), 1 / score, rtol=1e-9)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(k=0), "'k' parameter of TrustScore must be an int in the range"),
        (dict(k=True), "'k' parameter of TrustScore must not be a bool"),
        (dict(alpha=1.0), "alpha"),
        (dict(filtering="knn"), "filtering"),
        (dict(min_dist=-1.0), "min_dist"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        pll.TrustScore(**params).fit(np.zeros((3, 1)), [0, 1, 0])


def test_bad_input_names_rows():
    ts = pll.TrustScore().fit(np.arange(4.0)[:, None], [0, 0, 1, 1])
    with pytest.raises(InvalidDataError, match="row 1 holds 7"):
        ts.score(np.zeros((2, 1)), [0, 7])
    with pytest.raises(InvalidDataError, match="2 predicted labels for 3 rows"):
        ts.score(np.zeros((3, 1)), [0, 1])
    with pytest.raises(InvalidDataError, match=r"1 row\(s\) have a feature that is NaN or infinite \(first at row 2"):
        ts.score(np.array([[0.0], [1.0], [np.nan]]), [0, 1, 1])
    with pytest.raises(InvalidDataError, match="features"):
        ts.score(np.zeros((1, 2)), [0])
    with pytest.raises(InvalidDataError, match="row 0 holds 5"):
        pll.TrustScore().fit(np.zeros((2, 1)), [5, 0], classes=[0, 1])
    with pytest.raises(InvalidDataError, match="compares classes"):
        pll.TrustScore().fit(np.zeros((2, 1)), [3, 3])
    with pytest.raises(NotFittedError):
        pll.TrustScore().score(np.zeros((1, 1)), [0])


def test_class_sets_of_a_partial_label_method():
    from pll.reject.trust_score import class_set_rows, partial_label_trust, with_trust

    S = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=bool)
    accepted = np.array([False, True, True, False])
    assert class_set_rows(S, accepted, "all").all()
    assert class_set_rows(S, accepted, "single").tolist() == [True, False, True, False]
    assert class_set_rows(S, accepted, "accepted").tolist() == accepted.tolist()
    with pytest.raises(InvalidParameterError, match="class_sets"):
        class_set_rows(S, accepted, "some")
    X = np.array([[0.0], [1.0], [5.0], [6.0]])
    with pytest.warns(UserWarning, match=r"class\(es\) 1 have no points"):  # row 1 is not single
        ts = partial_label_trust(X, S, np.array([0, 1, 2, 2]), accepted, "single")
    assert ts.classes_.tolist() == [0, 1, 2] and ts.kept_.tolist() == [True, False, True, False]
    score = ts.score(np.array([[0.5], [5.5]]), [0, 2])
    assert score.tolist() == pytest.approx([4.5 / 0.5, 5.5 / 0.5])
    pred = pll.RejectPrediction(np.array([0, 2]), np.array([True, True]), np.zeros(2), np.array([False, True]))
    r = with_trust(pred, np.array([1.5, 1.6]))  # accept iff score > DEFAULT_THRESHOLD = 1.5
    assert r.accept.tolist() == [False, True] and r.guess.tolist() == [False, True] and r.labels is pred.labels


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_neighbor_lists_give_the_same_scores_as_the_full_search(seed):
    """Lists settle the rows they can; the rest are searched: same scores and h̃ as without lists."""
    rng = np.random.default_rng(seed)
    n, m, d, n_classes = rng.integers(5, 40), rng.integers(1, 20), rng.integers(1, 4), rng.integers(2, 5)
    X = rng.integers(0, 4, size=(n, d)).astype(float)  # coarse values: ties and duplicates
    Q = rng.integers(0, 4, size=(m, d)).astype(float)
    labels, predicted = rng.integers(0, n_classes, n), rng.integers(0, n_classes, m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ts = pll.TrustScore().fit(X, labels, classes=np.arange(n_classes), members=rng.random(n) < 0.8)
    k = int(rng.integers(1, n - 1))
    lists = pll.neighbors.kneighbors(X, Q, k), pll.neighbors.kneighbors(X, None, k)
    for closest in (False, True):
        expected = ts.score(Q, predicted, closest), ts.score_training(None, closest)
        got = ts.score(Q, predicted, closest, neighbors=lists[0]), ts.score_training(None, closest, neighbors=lists[1])
        for e, g in zip(expected, got):
            np.testing.assert_array_equal(np.asarray(e), np.asarray(g))


def test_neighbor_lists_must_match_the_queries():
    X = np.arange(10.0).reshape(5, 2)
    ts = pll.TrustScore().fit(X, np.array([0, 0, 1, 1, 1]))
    own = pll.neighbors.kneighbors(X, None, 2)
    with pytest.raises(pll.errors.NeighborsError, match="new queries"):
        ts.score(X, np.zeros(5, dtype=int), neighbors=own)
    with pytest.raises(pll.errors.NeighborsError, match="4 rows were given"):
        ts.score(X[:4], np.zeros(4, dtype=int), neighbors=pll.neighbors.kneighbors(X, X, 2))


@pytest.mark.parametrize("bags", [np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]], dtype=bool),
                                  [{0, 1}, {1}, {2}, {0, 2}]])
def test_fit_with_candidate_sets_says_it_takes_labels_and_how_to_get_them(bags):
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(InvalidDataError, match=r"one label per row, not candidate sets.*disambiguate\(\)\.labels"):
        pll.TrustScore().fit(X, bags)
