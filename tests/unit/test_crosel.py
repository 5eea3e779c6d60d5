"""CroSel: two networks, each trained on the confident pseudo labels that the other network's memory bank selects."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

torch = pytest.importorskip("torch", reason="CroSel needs the deep extra (PyTorch)")

import pll  # noqa: E402
import pll.methods._crosel as crosel  # noqa: E402
from pll.errors import InvalidDataError, InvalidParameterError, NotFittedError  # noqa: E402
from pll.methods._cleaning import CLEANING_START, cleaned_bags  # noqa: E402
from pll.methods._crosel import HISTORY, LARGE_DATA_ROWS, CroSel, selection, step_loss  # noqa: E402
from pll.methods._proden import Proden  # noqa: E402
from pll.utils import _mlp  # noqa: E402
from pll.utils.progress import reporting  # noqa: E402

FAST = {"warmup_epochs": 3, "max_epochs": 4}


def blobs(n=120, n_classes=3, seed=0, n_features=5):
    return make_classification(
        n_samples=n, n_features=n_features, n_informative=4, n_redundant=0, n_classes=n_classes,
        n_clusters_per_class=1, random_state=seed,
    )


@pytest.fixture(scope="module")
def ambiguous():
    """Every bag holds the true label and one of the three others."""
    X, y = make_classification(
        n_samples=700, n_features=10, n_informative=6, n_redundant=0, n_classes=4,
        n_clusters_per_class=1, class_sep=1.5, random_state=0,
    )
    S = pll.noise.uniform(y, 4, p=1.0, r=1, random_state=0)
    return X, y, S


@pytest.fixture(scope="module")
def fitted(ambiguous):
    X, y, S = ambiguous
    return CroSel(batch_size=16, max_epochs=15, random_state=0).fit(X[:500], S[:500])


# --- the method: the loss and the selection against hand computations -----------------------------


def _numpy_probabilities(net, Z):
    """The network's training-mode softmax by hand: Linear → ReLU → batch normalisation (batch statistics) → Linear."""
    W0, b0, W1, b1 = (v.detach().numpy().astype(np.float64) for v in net._linear)
    scale, shift = (v.detach().numpy().astype(np.float64) for v in net._norm)
    h = np.maximum(Z @ W0 + b0, 0.0)
    h = (h - h.mean(axis=0)) / np.sqrt(h.var(axis=0) + 1e-5) * scale + shift  # biased variance, as PyTorch trains
    logits = h @ W1 + b1
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_the_step_loss_is_the_authors_loss_computed_by_hand():
    """CE of the pseudo labels on the softmax probabilities + λ_d · Σ_c (S ⊙ p_other)_c (−log p_c), one fixed batch."""
    rng = np.random.default_rng(0)
    n_features, l = 4, 5
    net = _mlp.Perceptron(n_features, l, (7,), np.random.default_rng(1))
    Z, Z_sel = rng.random((6, n_features)), rng.random((5, n_features))
    bags = rng.random((6, l)) < 0.5
    bags[np.arange(6), rng.integers(0, l, 6)] = True
    other = rng.dirichlet(np.ones(l), size=6)  # the other network's probabilities of the previous epoch
    targets = bags * other
    pseudo = rng.integers(0, l, 5)
    lam = (1 - 0.3) * 2.0
    loss, P = step_loss(net, torch.tensor(Z, dtype=torch.float32), torch.tensor(targets, dtype=torch.float32), lam,
                        torch.tensor(Z_sel, dtype=torch.float32), torch.tensor(pseudo))
    P_np, P_sel = _numpy_probabilities(net, Z), _numpy_probabilities(net, Z_sel)
    pll_part = lam * np.mean(np.sum(targets * -np.log(P_np + 1e-10), axis=1))
    soft = np.exp(P_sel) / np.exp(P_sel).sum(axis=1, keepdims=True)  # nn.CrossEntropyLoss applied to probabilities
    ce_part = np.mean(-np.log(soft[np.arange(5), pseudo]))
    np.testing.assert_allclose(loss.item(), ce_part + pll_part, rtol=1e-5)
    np.testing.assert_allclose(P.detach().numpy(), P_np, rtol=1e-4, atol=1e-6)
    # without selected rows only the partial-label part
    alone, _ = step_loss(net, torch.tensor(Z, dtype=torch.float32), torch.tensor(targets, dtype=torch.float32), lam)
    np.testing.assert_allclose(alone.item(), pll_part, rtol=1e-5)
    # the warm-up's classifier-consistent loss
    cc = crosel.cc_loss(torch.tensor(P_np), torch.tensor(bags, dtype=torch.float64))
    np.testing.assert_allclose(float(cc), np.mean(-np.log((bags * P_np).sum(axis=1) + 1e-10)))


def test_the_selection_is_a_row_by_row_loop():
    """Selected iff a tied top class of epoch t−1 is in the bag, the top class held three epochs, mean top > 0.9."""
    rng = np.random.default_rng(0)
    for _ in range(100):
        n, l = int(rng.integers(1, 15)), int(rng.integers(2, 5))
        history = rng.dirichlet(np.full(l, 0.3), size=(HISTORY, n))
        history[:, rng.random(n) < 0.3] = np.eye(l)[rng.integers(0, l)]  # sure rows, some tied with the bank's past
        history = np.round(history, 2).astype(np.float32)  # ties within a row
        bags = rng.random((n, l)) < 0.5
        threshold = float(rng.choice([0.5, 0.9]))
        mask, pseudo = selection(torch.tensor(history), torch.tensor(bags), threshold)
        for i in range(n):
            last = history[-1, i]
            in_bag = any(bags[i, c] and np.isclose(last[c], last.max(), rtol=1e-5, atol=1e-8) for c in range(l))
            tops = [int(np.argmax(history[e, i])) for e in range(HISTORY)]
            sure = history[:, i].mean(axis=0).max() > threshold
            assert bool(mask[i]) == (in_bag and tops[0] == tops[1] == tops[2] and sure)
            assert int(pseudo[i]) == tops[2]


@pytest.mark.parametrize("cleaning_alpha", [None, 0.05])
def test_training_steps_use_the_other_networks_bank(monkeypatch, ambiguous, cleaning_alpha):
    """Each main step: targets = bag ⊙ the selecting bank's last epoch, pseudo labels its selection, λ_d from its share.

    Without cleaning (the default) the targets are not renormalised, as in
    the authors' CroSel; with it (none before the 10th epoch) each row's sum
    to 1, as in the study's conformal CroSel.
    """
    X, y, S = ambiguous
    X, S = X[:200], S[:200]
    selections, steps = [], []
    monkeypatch.setattr(crosel, "selection", lambda h, b, t: selections.append((h.clone(), selection(h, b, t)))
                        or selections[-1][1])
    monkeypatch.setattr(crosel, "step_loss", lambda *a: steps.append(a) or step_loss(*a))
    clf = CroSel(batch_size=16, warmup_epochs=5, max_epochs=2, cleaning_alpha=cleaning_alpha, random_state=0).fit(X, S)
    n_steps = clf._steps_per_epoch(200)
    assert len(selections) == 2 * 2 and len(steps) == 2 * 2 * n_steps  # two selections per epoch; both networks
    Z = clf._scaled(X)
    row_of = {z.tobytes(): i for i, z in enumerate(Z)}
    for k in range(2):  # network 0's first epoch after the warm-up, then network 1's
        history, (mask, pseudo) = selections[k]
        share = float(mask.float().mean())
        np.testing.assert_allclose(clf.selected_shares_[k, 0], share)
        for net, Zb, targets, lam, *sel in steps[k * n_steps:(k + 1) * n_steps]:
            assert net is clf.networks_[k]
            rows = [row_of[z.tobytes()] for z in Zb.numpy()]
            expected = S[rows] * history[-1].numpy()[rows]
            if cleaning_alpha is None:
                np.testing.assert_array_equal(targets.numpy(), expected)
            else:
                np.testing.assert_allclose(targets.numpy(), expected / expected.sum(axis=1, keepdims=True), rtol=1e-6)
            assert lam == pytest.approx((1 - share) * 2.0)
            if share > 0.05:
                Zs, ps = sel
                sel_rows = [row_of[z.tobytes()] for z in Zs.numpy()]
                assert mask.numpy()[sel_rows].all()
                np.testing.assert_array_equal(ps.numpy(), pseudo.numpy()[sel_rows])
    # the two networks' selections come from different banks
    assert not torch.equal(selections[0][0], selections[1][0])


def test_disambiguation_and_prediction_recover_the_true_labels(ambiguous, fitted):
    X, y, S = ambiguous
    d = fitted.disambiguate()
    # measured: 89 % of the training rows recovered, 82 % on the held-out rows (a guess within the bag: 50 %)
    assert (d.labels == y[:500]).mean() > 0.85
    assert (fitted.predict(X[500:]) == y[500:]).mean() > 0.75
    np.testing.assert_allclose(fitted.weights_.sum(axis=1), 1.0)
    assert (fitted.weights_[~S[:500]] == 0).all()
    assert fitted.selected_shares_.shape == (2, 15) and (fitted.selected_shares_[:, -1] > 0.5).all()
    assert fitted.fit_summary() == {"epochs": 15, "warmup_epochs": 10, "networks": 2,
                                    "selected_share": pytest.approx(fitted.selected_shares_[:, -1].mean())}


# --- candidate cleaning (the UAI 2025 study's conformal CroSel) ---------------------------------------


def test_cleaned_targets_are_the_previous_probabilities_on_the_cleaned_bags_renormalised(ambiguous, fitted):
    """Row by row: the two networks' mean inference probabilities clean the bag; a row left with no mass gets its bag."""
    X, y, S = ambiguous
    rng = np.random.default_rng(0)
    rows = rng.permutation(500)[:40]
    bags = S[:500].astype(bool)
    previous = rng.dirichlet(np.ones(4), size=40).astype(np.float32)
    previous[:5] = np.where(bags[rows[:5]], 0.0, previous[:5])  # nothing on the bag: the fallback
    scores = np.sort(rng.random(60))
    Zb = torch.from_numpy(fitted._scaled(X[rows]))
    clf = CroSel(cleaning_alpha=0.1)
    for epoch_scores in (scores, None):
        cleaning = None if epoch_scores is None else (epoch_scores, bags[rows])
        got = clf._cleaned_targets(fitted.networks_, Zb, torch.from_numpy(previous),
                                   torch.from_numpy(bags[rows].astype(np.float32)), cleaning, CLEANING_START + 1).numpy()
        P = 0.5 * sum(net.predict_proba(fitted._scaled(X[rows]), np.float32) for net in fitted.networks_)
        allowed = bags[rows] if epoch_scores is None else cleaned_bags(P, bags[rows], scores, 0.1, CLEANING_START + 1)
        for i in range(40):
            t = previous[i] * allowed[i]
            if t.sum() <= 1e-10:
                t = (previous[i] + 1e-3) * bags[rows[i]]
            np.testing.assert_allclose(got[i], t / t.sum(), rtol=1e-5, atol=1e-7)
        assert (allowed.sum() < bags[rows].sum()) == (epoch_scores is not None)  # scores: some candidate dropped


def test_cleaning_runs_from_the_tenth_epoch_after_the_warm_up_and_recovers_the_true_labels(monkeypatch, ambiguous):
    X, y, S = ambiguous
    calls = []
    monkeypatch.setattr(crosel, "cleaned_bags",
                        lambda P, bags, scores, alpha, epoch: calls.append((epoch, alpha, bags))
                        or cleaned_bags(P, bags, scores, alpha, epoch))
    clf = CroSel(batch_size=16, max_epochs=15, cleaning_alpha=0.05, random_state=0).fit(X[:500], S[:500])
    epochs = sorted({epoch for epoch, _, _ in calls})
    assert epochs == list(range(CLEANING_START, 15)) and {alpha for _, alpha, _ in calls} == {0.05}
    assert (clf.disambiguate().labels == y[:500]).mean() > 0.85
    assert (clf.predict(X[500:]) == y[500:]).mean() > 0.75
    np.testing.assert_allclose(clf.weights_.sum(axis=1), 1.0)
    assert (clf.weights_[~S[:500]] == 0).all()
    plain = CroSel(batch_size=16, max_epochs=15, random_state=0).fit(X[:500], S[:500])
    assert not np.array_equal(clf.weights_, plain.weights_)


def test_the_prediction_averages_the_two_networks(fitted, ambiguous):
    X = ambiguous[0][500:]
    Z = fitted._scaled(X, np.float64)
    a, b = (net.predict_proba(Z) for net in fitted.networks_)
    assert not np.allclose(a, b)
    np.testing.assert_allclose(fitted.predict_proba(X), (a + b) / 2, rtol=1e-12)


# --- epochs, batches, steps -----------------------------------------------------------------------


def test_batches_and_the_step_cap():
    clf = CroSel()
    assert clf._batch(LARGE_DATA_ROWS - 1) == 64 and clf._batch(LARGE_DATA_ROWS) == 256
    clf.n_classes_ = 3
    assert clf._epochs(4000) == (10, 300)  # bird-song: 62 steps an epoch, 310 epochs within 20,000 steps
    assert clf._epochs(20000) == (10, 246)  # 78 steps an epoch: 256 epochs in 20,000 steps
    assert clf._epochs(10**6) == (3, 2)  # 3,906 steps an epoch: 5 epochs, the warm-up at least 3
    assert CroSel(batch_size=16)._batch(10**6) == 16
    one = CroSel(max_steps=1)
    one.n_classes_ = 3
    assert one._epochs(100) == (3, 1)


def test_max_steps_caps_the_epochs():
    X, y = blobs(160)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)  # 10 steps of 16 rows an epoch
    clf = CroSel(batch_size=16, warmup_epochs=4, max_epochs=10, max_steps=80, random_state=0).fit(X, S)
    assert (clf.n_warmup_epochs_, clf.n_epochs_) == (4, 4) and clf.selected_shares_.shape == (2, 4)


# --- seeds ----------------------------------------------------------------------------------------


def test_same_seed_same_model_other_seed_another():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    a, b = (CroSel(**FAST, random_state=5).fit(X, S) for _ in range(2))
    np.testing.assert_array_equal(a.weights_, b.weights_)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    other = CroSel(**FAST, random_state=6).fit(X, S)
    assert not np.array_equal(a.predict_proba(X), other.predict_proba(X))


# --- candidate-set forms, odd bags ----------------------------------------------------------------


def test_every_candidate_set_form_gives_the_same_fit():
    X, y = blobs(60)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0).astype(bool)
    forms = [S, S.astype(int), sp.csr_matrix(S), [set(np.flatnonzero(row)) for row in S]]
    fits = [CroSel(**FAST, random_state=0).fit(X, f) for f in forms]
    for clf in fits[1:]:
        np.testing.assert_array_equal(clf.weights_, fits[0].weights_)
        np.testing.assert_array_equal(clf.predict_proba(X), fits[0].predict_proba(X))
    labels = CroSel(**FAST, random_state=0).fit(X, y)  # 1-d labels: one candidate a row
    one_hot = CroSel(**FAST, random_state=0).fit(X, np.eye(3, dtype=bool)[y])
    np.testing.assert_array_equal(labels.predict_proba(X), one_hot.predict_proba(X))


def test_label_sets_with_string_labels():
    X, y = blobs(90)
    names = np.array(["cat", "dog", "owl"])
    S = [{names[c], names[(c + 1) % 3]} if i % 2 else {names[c]} for i, c in enumerate(y)]
    clf = CroSel(batch_size=16, max_epochs=15, random_state=0).fit(X, S)
    np.testing.assert_array_equal(clf.classes_, names)
    assert (clf.predict(X) == names[y]).mean() > 0.8
    assert all(label in bag for label, bag in zip(clf.disambiguate().labels, S))


def test_an_empty_bag_counts_as_every_class():
    X, y = blobs(60)
    S = np.eye(3, dtype=bool)[y]
    S[0] = False
    clf = CroSel(**FAST, random_state=0).fit(X, S)
    full = S.copy()
    full[0] = True
    ref = CroSel(**FAST, random_state=0).fit(X, full)
    np.testing.assert_array_equal(clf.weights_, ref.weights_)
    np.testing.assert_array_equal(clf.predict_proba(X), ref.predict_proba(X))
    assert not clf.S_train_[0].any()


def test_a_class_in_no_bag_gets_probability_zero():
    X, y = blobs(60)
    S = np.zeros((60, 4), dtype=bool)
    S[np.arange(60), y] = True  # class 3 is in no bag
    P = CroSel(**FAST, random_state=0).fit(X, S).predict_proba(X)
    assert P.shape == (60, 4) and (P[:, 3] == 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)


def test_one_class_in_every_bag_predicts_it():
    X, _ = blobs(30)
    clf = CroSel(**FAST, random_state=0).fit(X, np.array(["a"] * 30))
    assert (clf.predict(X) == "a").all() and (clf.predict_proba(X) == 1.0).all() and clf.n_epochs_ == 0


def test_scales_inside_so_feature_scale_does_not_matter():
    X, y = blobs(90)
    moved = X * np.logspace(-3, 3, X.shape[1]) + 100.0
    a, b = (CroSel(**FAST, random_state=1).fit(Z, y) for Z in (X, moved))
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(moved), atol=1e-4)
    np.testing.assert_allclose(b.offset_, moved.min(axis=0))


# --- bad input: the same errors as Proden ---------------------------------------------------------


def _error(call):
    with pytest.raises(Exception) as exc:
        call()
    return type(exc.value), str(exc.value)


def test_bad_data_gets_the_same_errors_as_proden():
    X, y = blobs(30)
    bad = X.copy()
    bad[3, 1] = np.nan
    S = np.eye(3, dtype=bool)[y]
    cases = [
        lambda cls: cls().fit(bad, y),  # NaN
        lambda cls: cls().fit(X, y[:20]),  # row counts differ
        lambda cls: cls().fit(X[0], y),  # 1-d features
        lambda cls: cls().fit(X, S[:, :, None]),  # 3-d candidate sets
        lambda cls: cls().fit(X, [{0}] * 29 + [0]),  # not a set
    ]
    for case in cases:
        (kind, text), (ref_kind, ref_text) = (_error(lambda: case(cls)) for cls in (CroSel, Proden))
        assert kind is ref_kind and issubclass(kind, (InvalidDataError, InvalidParameterError))
        assert text.replace("CroSel", "<m>") == ref_text.replace("Proden", "<m>") and "\n" not in text
    # a class no bag holds is no error: it gets probability 0 (above), as Proden's
    clf = CroSel(**FAST, random_state=0).fit(X, y)
    ref = Proden(max_epochs=2, random_state=0).fit(X, y)
    for call in (lambda c: c.predict(X[:, :3]), lambda c: c.predict(bad),
                 lambda c: c.predict_with_reject(X, candidates=np.ones((30, 2), dtype=bool))):
        (kind, text), (ref_kind, ref_text) = (_error(lambda: call(c)) for c in (clf, ref))
        assert kind is ref_kind and text.replace("CroSel", "<m>") == ref_text.replace("Proden", "<m>")


@pytest.mark.parametrize(
    "params, match",
    [
        ({"max_epochs": 0}, "'max_epochs'"),
        ({"warmup_epochs": 2}, "'warmup_epochs'"),
        ({"max_steps": 0}, "'max_steps'"),
        ({"alpha": -1.0}, "'alpha'"),
        ({"learning_rate": 0.0}, "'learning_rate'"),
        ({"batch_size": True}, "'batch_size'"),
        ({"batch_size": 1}, "'batch_size'"),
        ({"batch_size": "big"}, "'batch_size'"),
        ({"hidden_layer_sizes": (0,)}, "'hidden_layer_sizes'"),
        ({"hidden_layer_sizes": 256}, "'hidden_layer_sizes'"),
        ({"selection_threshold": 1.0}, "'selection_threshold'"),
        ({"pll_weight": -1.0}, "'pll_weight'"),
        ({"cleaning_alpha": 1.0}, "'cleaning_alpha'"),
        ({"threshold": 1.5}, "'threshold'"),
        ({"conflict_margin": -0.1}, "'conflict_margin'"),
        ({"random_state": -1}, "'random_state'"),
        ({"device": "tpu"}, "device='tpu'"),
    ],
)
def test_bad_parameters_are_refused_naming_them(params, match):
    X, y = blobs(30)
    with pytest.raises(InvalidParameterError, match=match) as exc:
        CroSel(**params).fit(X, y)
    assert "\n" not in str(exc.value)
    shared = {k: v for k, v in params.items() if k in Proden().get_params()}
    if shared:  # a parameter Proden has too: the same message, but for the name
        with pytest.raises(InvalidParameterError) as ref:
            Proden(**shared).fit(X, y)
        assert str(exc.value).replace("CroSel", "<m>") == str(ref.value).replace("Proden", "<m>")


@pytest.mark.parametrize("call", [lambda c, X: c.predict(X), lambda c, X: c.predict_with_reject(X),
                                  lambda c, X: c.conformity(X), lambda c, X: c.disambiguate()])
def test_not_fitted(call):
    with pytest.raises(NotFittedError, match="CroSel is not fitted"):
        call(CroSel(), np.zeros((2, 3)))


# --- the reject option, pickling, progress --------------------------------------------------------


def test_predict_with_reject_accepts_iff_the_top_probability_reaches_0_9(ambiguous, fitted):
    X, y = ambiguous[0][500:], ambiguous[1][500:]
    P = fitted.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    r = fitted.predict_with_reject(X)
    assert fitted.threshold == 0.9
    np.testing.assert_array_equal(r.labels, P.argmax(axis=1))
    np.testing.assert_allclose(r.score, P.max(axis=1))
    np.testing.assert_array_equal(r.accept, r.score >= 0.9)
    assert 0 < r.accept.sum() < len(X)
    np.testing.assert_array_equal(r.reason == "none", r.accept)
    assert set(r.reason) <= {"none", "conflict", "low_score"}
    np.testing.assert_allclose(fitted.decision_function(X), r.score)
    assert (r.labels[r.accept] == y[r.accept]).mean() > (r.labels[~r.accept] == y[~r.accept]).mean()
    restricted = fitted.predict_with_reject(X, candidates=[{1, 3}] * len(X))
    assert set(restricted.labels) <= {1, 3}


def test_pickling_round_trips(ambiguous, fitted):
    X = ambiguous[0][500:]
    copy = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(copy.predict_proba(X), fitted.predict_proba(X))
    r, s = copy.predict_with_reject(X), fitted.predict_with_reject(X)
    np.testing.assert_array_equal(r.labels, s.labels)
    np.testing.assert_array_equal(r.accept, s.accept)
    np.testing.assert_array_equal(copy.disambiguate().labels, fitted.disambiguate().labels)


def test_progress_lines_over_the_fit():
    X, y = blobs(90)
    S = pll.noise.uniform(y, 3, p=1.0, r=1, random_state=0)
    lines = []
    with reporting(lambda p: lines.append(p), min_rows=0, every_seconds=0.0):
        clf = CroSel(**FAST, random_state=0).fit(X, S)
    stages = 2 * (clf.n_warmup_epochs_ + clf.n_epochs_)  # passes over the rows: each network's epochs
    assert len(lines) == stages and all(p.what.startswith("CroSel 2 networks") for p in lines)
    assert [p.done for p in lines] == [90 * (s + 1) for s in range(stages)] and lines[-1].total == 90 * stages
    assert "done in" in str(lines[-1])
