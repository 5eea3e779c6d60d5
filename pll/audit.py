"""Auditing training bags: the rows whose candidate set the evidence of the other rows contradicts.

The audit in short (:func:`audit_bags`).  Every row ``i`` gets a distribution
``P_i`` over the labels from evidence that never saw its bag, and its
*suspicion* is the probability outside the bag, ``1 − Σ_{y ∈ S_i} P_i(y)``:
the estimated chance that its true label is not a candidate.  ``P_i`` mixes

* the out-of-fold probabilities of cross-fitted learners (by default two
  PRODEN networks, :func:`default_learners`): the rows are split into 5
  folds, and row ``i``'s come from a network fitted on the other folds
  (:func:`cross_fitted_proba`);
* the leave-one-out support of its nearest neighbors (below,
  :func:`neighbor_support`),

with the weights that maximise the likelihood of the bags,
``mean_i log Σ_{y ∈ S_i} P_i(y)`` (:func:`mixture_weights`).  So a row's own
bag moves its suspicion only through the sum over the bag and through the
mixture's weights (a few numbers fitted on all rows).  Why: a network sees
the shape of the classes where neighbors see only their own few rows; the
neighbors are sharp where classes are small or tight; the likelihood of the
bags, which needs no true label, tells how much to trust each on the data at
hand.  Why the probability *outside* the bag rather than confident
learning's ``1 − max_{y ∈ S} P(y)``: a bag of several labels is right if any
of them is, and its members share the probability.  In
``benchmarks/audit.py`` (15 % of the bags replaced by bags that miss their
true label) this ranks the wrong bags ahead of the neighbors' majority vote
and of confident learning on a cross-fitted PRODEN: by 6 points of precision
among the top 10 % on average over seven data sets and 5.5 over three held
out, with a higher AUC on all ten (the table is in the audit guide,
``docs/guide/audit.md``).

The neighbors' support.  Definitions.  Row ``i`` of ``n`` training rows has features ``x_i`` and a bag
``S_i ⊆ Y`` of the ``l`` classes; ``N(i)`` are its ``k`` nearest *other*
training rows (the row is excluded by index, :func:`pll.neighbors.kneighbors`
with ``X_query=None``), at distances ``d_ij``.  Neighbor ``j`` of row ``i`` has weight

    w_ij = exp(−(d_ij / h_i)²),   h_i = max_{j ∈ N(i)} d_ij      (``weights="distance"``)

(all weights 1 when ``h_i = 0``, or with ``weights="uniform"``), and every
neighborhood also holds a pseudo-neighbor of weight ``a`` (``prior``, default
1: a neighbor at distance 0) that gives every label ``1/l``.  A bag alone says its row's label is one of its
members, each alike:

    v_j(y) = [y ∈ S_j] / |S_j|            (0 for an empty bag, which says nothing).

Before neighbor ``j`` speaks for row ``i``, its bag is disambiguated by its own
neighbors other than ``i`` (``refine=True``, the default):

    r_j(y) = Σ_{m ∈ N(j), m ≠ i} w_jm v_m(y) + a / l,
    q_j(y) = [y ∈ S_j] r_j(y) / Σ_{y' ∈ S_j} r_j(y')           (0 when S_j = ∅);

with ``refine=False``, ``q_j = v_j``.  The *support* of label ``y`` at row
``i`` is the weighted average

    p_i(y) = (Σ_{j ∈ N(i)} w_ij q_j(y) + a / l) / (Σ_{j ∈ N(i), S_j ≠ ∅} w_ij + a),

a distribution over ``Y`` (:func:`neighbor_support`), and the *suspicion* of
row ``i``'s bag is the support that falls outside it:

    suspicion_i = 1 − Σ_{y ∈ S_i} p_i(y)          (1 for an empty bag).

Why this score.  Near rows tend to share their label, so ``p_i`` is the
neighbors' estimate of ``P(y_i = y)``, and the suspicion estimates the
probability that the row's true label lies outside its bag -- the event an
audit looks for.  It is high when every label of the bag has little support and
when a label outside has much: support is conserved, so these are one event.
Unlike a margin between the best label outside and the best inside, it credits
a bag of several labels with the support of all of them: the question is
whether the truth is in the bag, not which member it is.

* Leave-one-out is exact: ``p_i`` reads the bags ``S_j`` and ``S_m`` of rows
  ``j, m ≠ i`` only (``i`` is dropped from its neighbors' neighborhoods too),
  so a row's own bag never votes for itself, and changing ``S_i`` changes
  ``suspicion_i`` only through the sum over ``S_i``.
* Bag-size weighting: a neighbor with a bag of ``b`` labels gives each ``1/b``,
  so a large bag is weak evidence and a single-label bag strong.  Averaging
  the neighbors' distributions, rather than multiplying their likelihoods,
  keeps one neighbor with a wrong bag from vetoing a label.
* Refinement: class-dependent bags pair a class ``c`` with a partner ``c'``,
  so many rows of class ``c`` carry ``{c, c'}``; their plain vote gives ``c'``
  half their weight, and a wrong bag ``{c'}`` among them looks half right.
  Their own neighbors move that weight back to ``c``.  One step only: more
  steps would let the row's own bag back in through longer paths unless every
  path left it out, at ``k`` times the work per step.
* Distance weights favour the nearest neighbors but never fall below
  ``e^{-1}`` of the nearest's, so no single neighbor dominates and exact
  duplicates (distance 0) need no special case.
* The pseudo-neighbor keeps ``p_i`` defined when every neighbor's bag is
  empty, and gives every label support ``> 0``, so a non-empty bag's suspicion
  stays below 1: empty bags, at exactly 1, come first.

DST-PLL's evidence was the first candidate: with the query's candidate set
``s̃ = Y``, Yager's rule gives ``pl({y}) = 2^{−m_y} + c``, with ``m_y`` the
number of informative neighbors whose bags lack ``y`` and ``c`` the conflict
-- a count of exclusions, in which a two-label bag speaks for each member as
strongly as a single-label bag, and each neighbor with a wrong bag halves the
first term for its true label.  Its margin ``max_{y ∉ S} pl − max_{y ∈ S} pl``
ranked wrong bags with a lower AUC than the suspicion above in five of six
settings of data kept apart from the benchmark (msrc-v2's own bags,
mfeat-fourier and semeion with class-dependent bags, ν = 0.1 and 0.3, seeds
100-104; msrc-v2 at ν = 0.3: 0.62 against 0.68).  The defaults (``k = 10``,
distance weights, ``a = 1``, refinement on) were fixed there too, before the
benchmark ran.

What the neighbors' suspicion alone does not measure is how confident a contradiction is: among
its highest-ranked bags are right ones in regions where the neighbors spread
their support over many labels, whereas a unanimous majority against a bag is
rarely wrong.  At low noise a majority vote's top 5 % can hold more wrong bags
(bird-song, ν = 0.1: 0.43 against 0.27 in ``benchmarks/audit.py``) even though
its ranking as a whole is worse; the table's ``best_out`` is that confidence.

The baseline (:func:`majority_disagreement`) flags a bag that misses the
label most neighbors' bags hold.  :func:`precision_at_top` and
:func:`ranking_auc` judge a ranking against known wrong bags, with empty bags
left out (they are found without looking at any neighbor).
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import pandas as pd

from .errors import InvalidDataError, InvalidParameterError
from .neighbors import NeighborResult, kneighbors
from .neighbors.registry import check_backend
from .utils._random import seed_to_int
from .utils.progress import track
from .utils.validation import (
    check_features,
    check_mask,
    check_positive_int,
    check_scores,
    encode_bags,
    is_sparse,
    label_sets,
)

WEIGHTS = ("distance", "uniform")
DEFAULT_FOLDS = 5
"""Folds of the cross-fitted learners: each fit sees 80 % of the rows (3 folds, 67 %, ranked worse)."""
# Rows per block of the refinement, so that its (rows, k, k, l) arrays stay near 8 MB.
_BLOCK_CELLS = 1 << 20


def audit_bags(
    X,
    S,
    *,
    n_neighbors=10,
    weights="distance",
    prior=1.0,
    refine=True,
    knn="auto",
    knn_options=None,
    neighbors=None,
    classes=None,
    learners="auto",
    n_folds=DEFAULT_FOLDS,
    random_state=0,
):
    """Rank the training rows by how strongly the evidence of other rows contradicts their bag, most suspicious first.

    Each row is judged without its own bag: by cross-fitted learners (their
    out-of-fold class probabilities) and by its ``n_neighbors`` nearest other
    rows (their support ``p_i(y)`` of each label), mixed with the weights
    that best explain the bags (:func:`mixture_weights`); the suspicion is
    the mixed probability outside the bag, ``1 − Σ_{y ∈ S_i} P_i(y)``
    (definitions and why: :mod:`pll.audit`).

    Parameters
    ----------
    X : array of shape (n, d) or None
        Features of the training rows; None only when ``neighbors`` is given.
    S : candidate sets of the n rows
        A 0/1 or bool matrix of shape (n, l), or one set of labels per row
        (:func:`pll.utils.validation.encode_bags`).  Empty bags are allowed.
    n_neighbors : int, default=10
    weights : {"distance", "uniform"}, default="distance"
        ``exp(−(d / d_k)²)``, ``d_k`` the row's farthest neighbor, or all 1.
    prior : float > 0, default=1.0
        Weight of the pseudo-neighbor that gives every label ``1/l``.
    refine : bool, default=True
        Disambiguate each neighbor's bag by its own neighbors (the row itself left out) before it votes.
    knn : str, default="auto"
        Neighbor backend (:func:`pll.neighbors.kneighbors`), used when ``neighbors`` is None.
    knn_options : dict, optional
        Options of the backend.
    neighbors : NeighborResult, optional
        The training rows' own neighbors (``kneighbors(X, None, k)`` with
        ``k >= n_neighbors``), to share one search; its first ``n_neighbors``
        columns are used.
    classes : sequence of length l, optional
        Class names for a matrix ``S`` (default ``0 .. l-1``); for label sets,
        the classes their labels are drawn from (default: the sorted labels seen).
    learners : "auto", None or sequence of estimators, default="auto"
        Learners cross-fitted on the bags (``fit(X, S)``, ``predict_proba``:
        the methods of :mod:`pll.methods`); ``"auto"`` is
        :func:`default_learners`, None or ``()`` the neighbors alone (the
        suspicion of earlier versions).
    n_folds : int >= 2, default=5
        Folds of the cross-fitting.
    random_state : int, default=0
        Seeds the folds and the default learners.

    Returns
    -------
    DataFrame with one row per training row, sorted by ``empty_bag`` (True
    first), then ``suspicion`` (highest first), then ``row``, and columns

    - ``row``: the 0-based row of ``X`` and ``S``;
    - ``bag``: its class names joined by ``"|"`` (``""`` for an empty bag);
    - ``suggested``: the labels with support at least half the largest,
      by decreasing support (ties in class order), joined by ``"|"``;
    - ``suspicion``: float in [0, 1], 1.0 exactly for empty bags;
    - ``empty_bag``: bool;
    - ``best_in``: the largest support of a label in the bag (0.0 when empty);
    - ``best_out``: the largest support of a label outside it (0.0 when the bag is every class);
    - ``favoured``: the reason of the suspicion, the labels outside the bag
      with probability at least half the largest outside, by decreasing
      probability (ties in class order), joined by ``"|"`` (``""`` when the bag is every class);
    - ``reason``: the same labels with their probabilities, e.g. ``"a 0.62, c 0.31"``;
    - ``neighbor_suspicion``, ``learner_suspicion``: the probability outside
      the bag by the neighbors alone and by the learners alone (their mixture
      weights renormalised; NaN without learners).

    "Support" is the mixed probability ``P_i``; the mixture weights, by
    source (``learner_1``, ..., ``neighbors``), are in ``table.attrs["mixture_weights"]``.

    Raises
    ------
    InvalidDataError
        Features or bags of the wrong shape or values, row counts that differ,
        or no features for the learners.
    InvalidParameterError
        An out-of-range parameter, an unknown backend option, a learner without ``fit``/``predict_proba``.
    NeighborsError
        More neighbors than rows, or a neighbor result of the wrong kind or size.

    Notes
    -----
    Of equally distant candidates for the ``k``-th neighbor, the lower row
    index is taken (the order of every backend), so a row among exact
    duplicates may see some of them and not others.

    Examples
    --------
    Two clusters; row 3 carries the other cluster's label, row 9 an empty bag:

    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.2], [0.3], [0.4], [5.0], [5.1], [5.2], [5.3], [5.4]])
    >>> S = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0],
    ...               [0, 1, 0], [0, 1, 1], [0, 1, 0], [0, 1, 0], [0, 0, 0]])
    >>> table = audit_bags(X, S, n_neighbors=3, classes=["a", "b", "c"], learners=None)
    >>> print(table.head(2)[["row", "bag", "suspicion", "favoured", "reason"]].round(3).to_string(index=False))
     row bag  suspicion favoured reason
       9          1.000        b b 0.75
       3   b      0.867        a a 0.75
    """
    _check_options(weights, prior, refine)  # before the search, which may be long
    bags, names = _check_bags(X, S, classes)
    learners = _check_learners(learners, random_state)
    n_folds = _check_folds(n_folds, bags.shape[0]) if learners else n_folds
    if learners and X is None:
        raise InvalidDataError("X is None: the learners need the features (or pass learners=None)")
    support = neighbor_support(
        bags,
        _own_neighbors(X, bags.shape[0], n_neighbors, knn, knn_options, neighbors),
        n_neighbors=n_neighbors,
        weights=weights,
        prior=prior,
        refine=refine,
    )
    sources = _cross_fitted(X, bags, learners, n_folds, random_state) + [support]
    mix = mixture_weights(sources, bags)
    proba = np.einsum("s,snl->nl", mix, np.asarray(sources))
    learned = (np.einsum("s,snl->nl", mix[:-1], np.asarray(sources[:-1])) / mix[:-1].sum()
               if learners and mix[:-1].sum() > 0 else np.full(bags.shape, np.nan))
    table = _table(bags, names, proba, {"neighbor_suspicion": support, "learner_suspicion": learned})
    table.attrs["mixture_weights"] = dict(zip([f"learner_{s + 1}" for s in range(len(learners))] + ["neighbors"],
                                              mix.tolist()))
    return table


def _table(bags, names, proba, parts):
    """The ranked table of :func:`audit_bags` from the mixed probabilities (and those of its parts)."""
    empty = ~bags.any(axis=1)
    suspicion = np.where(empty, 1.0, 1.0 - np.where(bags, proba, 0.0).sum(axis=1))
    best_in = np.where(bags, proba, 0.0).max(axis=1)
    best_out = np.where(bags, 0.0, proba).max(axis=1)
    rows = np.arange(bags.shape[0])
    order = np.lexsort((rows, -suspicion, ~empty))
    labels = np.asarray([str(name) for name in names], dtype=object)
    favoured, reason = _favoured(np.where(bags, -1.0, proba)[order], labels)
    table = pd.DataFrame(
        {
            "row": rows[order],
            "bag": _joined(bags[order], labels),
            "suggested": _suggested(proba[order], labels),
            "suspicion": suspicion[order],
            "empty_bag": empty[order],
            "best_in": best_in[order],
            "best_out": best_out[order],
            "favoured": favoured,
            "reason": reason,
        }
    )
    for column, p in parts.items():
        table[column] = np.where(empty, 1.0, 1.0 - np.where(bags, p, 0.0).sum(axis=1))[order]
    return table


def default_learners(random_state=0):
    """The audit's cross-fitted learners: two PRODEN networks, one of two layers of 200 units (40 epochs), one of 100.

    Why these.  On the benchmark's development sets (``benchmarks/audit.py``,
    15 % planted bags) a network's probability outside the bag ranked wrong
    bags better than the neighbors where the classes have a shape (synthetic,
    bird-song) and worse where the neighbors are sharp (semeion, flare); the
    mixture of both beat either.  A two-layer and a one-layer network mixed
    better than two two-layer ones (precision at the top 10 %: +7.7 points
    over the better baseline against +6.3), and PRODEN's own network
    (3 × 300 units) in place of the two-layer one ranked no better (+6.6)
    at two to three times its cost.  At 20,000 rows and 5 folds both take
    about a minute on two busy cores.
    """
    from .methods import Proden

    return [
        Proden(hidden_layer_sizes=(200, 200), max_epochs=40, random_state=random_state),
        Proden(hidden_layer_sizes=(100,), max_epochs=30, random_state=random_state),
    ]


def cross_fitted_proba(X, S, estimator, *, n_folds=DEFAULT_FOLDS, random_state=0):
    """Out-of-fold class probabilities, shape (n, l): row ``i``'s come from a clone of ``estimator`` fitted without it.

    The rows are split once into ``n_folds`` folds by a seeded permutation
    (it depends on ``n`` and ``random_state`` only, never on the bags);
    for each fold a clone is fitted on the other folds' rows with a
    non-empty bag (an empty bag says nothing) and predicts the fold.  So row
    ``i``'s probabilities do not depend on ``S[i]``.  ``S`` is a bag matrix
    or label sets, as :func:`audit_bags` takes them.
    """
    bags, _ = _check_bags(X, S, None)
    if X is None:
        raise InvalidDataError("X is None: a learner needs the features")
    (learner,) = _check_learners([estimator], random_state)
    return _cross_fitted(X, bags, [learner], _check_folds(n_folds, bags.shape[0]), random_state)[0]


def mixture_weights(sources, bags, *, max_iter=1000, tol=1e-10):
    """The weights ``w`` on the simplex that make ``Σ_s w_s P_s`` explain the bags best, shape (len(sources),).

    ``P_s`` are distributions over the classes for every row (shape (n, l)
    each); ``w`` maximises the mean log-probability of the bags,
    ``mean_i log Σ_s w_s a_is`` with ``a_is = Σ_{y ∈ S_i} P_s[i, y]``, over
    the non-empty bags.  It is concave in ``w``, so EM's fixed point
    ``w_s ← mean_i w_s a_is / Σ_t w_t a_it`` is the maximum.  Why this
    criterion: it needs no true label, and a source whose probabilities
    are sharper where they are right gets more weight; with every source
    held out of the row it judges, the bags it is scored on are unseen.
    """
    a = np.asarray([np.where(bags, P, 0.0).sum(axis=1) for P in sources]).T  # (n, sources)
    a = a[bags.any(axis=1) & (a.sum(axis=1) > 0)]
    w = np.full(len(sources), 1.0 / len(sources))
    if a.shape[0] == 0 or len(sources) == 1:
        return w
    for _ in range(max_iter):
        mixed = a * w
        new = (mixed / mixed.sum(axis=1, keepdims=True)).mean(axis=0)
        done = np.abs(new - w).max() < tol
        w = new
        if done:
            break
    return w


def neighbor_support(bags, neighbors, *, n_neighbors=None, weights="distance", prior=1.0, refine=True):
    """The leave-one-out support ``p_i(y)`` of every label at every training row, shape (n, l).

    Parameters
    ----------
    bags : bool array of shape (n, l)
    neighbors : NeighborResult
        The training rows' own neighbors (self excluded).
    n_neighbors : int, optional
        How many of its columns to use (default: all).
    weights, prior, refine
        As in :func:`audit_bags`.

    Returns
    -------
    support : float64 ndarray of shape (n, l)
        Each row sums to 1 (:mod:`pll.audit` defines it).  Row ``i`` does not
        depend on ``bags[i]``.
    """
    bags = _check_matrix(bags)
    n, n_classes = bags.shape
    nb = _take(neighbors, n, n_neighbors)
    prior = _check_options(weights, prior, refine)
    idx = nb.indices
    w = _weights(nb.distances, weights)
    votes = bags / np.maximum(bags.sum(axis=1), 1)[:, None]  # v_j; 0 for an empty bag
    spoken = bags.any(axis=1)[idx] * w  # weights of the neighbors whose bag says something
    base = prior / n_classes
    if refine:
        evidence = _refined_votes(bags, votes, idx, w, base)
    else:
        evidence = votes[idx]
    return (np.einsum("nk,nkl->nl", w, evidence) + base) / (spoken.sum(axis=1, keepdims=True) + prior)


def majority_disagreement(X, S, *, n_neighbors=10, knn="auto", knn_options=None, neighbors=None, classes=None):
    """The baseline: does the bag miss the label that most neighbors' bags hold?  Score per row, shape (n,).

    ``votes_i(y)`` counts the neighbors (the row itself left out) whose bag
    holds ``y``; the majority labels are those of most votes, and ``share``
    their count over ``n_neighbors``.  The score is ``1 + share`` when no
    majority label is in the bag, else ``1 − share``: a confident majority
    against the bag ranks first, a confident majority for it last.  Empty bags
    always disagree.  Parameters as :func:`audit_bags`.

    Examples
    --------
    >>> majority_disagreement([[0.0], [0.1], [0.2]], [[1, 0], [1, 0], [0, 1]], n_neighbors=2).tolist()
    [0.5, 0.5, 2.0]
    """
    bags, _ = _check_bags(X, S, classes)
    nb = _own_neighbors(X, bags.shape[0], n_neighbors, knn, knn_options, neighbors)
    votes = bags[nb.indices].sum(axis=1)
    top = votes.max(axis=1)
    disagree = ~((votes == top[:, None]) & bags).any(axis=1)
    share = top / nb.k
    return np.where(disagree, 1.0 + share, 1.0 - share)


def precision_at_top(score, wrong, q, *, empty=None):
    """The fraction of truly wrong bags among the ``⌈q·m⌉`` highest-scored of the ``m`` non-empty rows.

    Rows tied at the cutoff count by expectation (as if the tie were broken at
    random), so the value does not depend on row order.

    Parameters
    ----------
    score : array of shape (n,)
        Higher = more suspicious.
    wrong : bool array of shape (n,)
        True where the bag misses its row's true label.
    q : float in (0, 1]
    empty : bool array of shape (n,), optional
        Rows left out (empty bags).

    Examples
    --------
    >>> precision_at_top([0.9, 0.5, 0.5, 0.1], [True, True, False, False], 0.5)
    0.75
    """
    score, wrong = _kept(score, wrong, empty)
    if isinstance(q, bool) or not isinstance(q, Real) or not 0.0 < q <= 1.0:
        raise InvalidParameterError(f"q must be a fraction in (0, 1], got {q!r}")
    m = math.ceil(q * score.size - 1e-9)
    cutoff = np.sort(score)[::-1][m - 1]
    above = score > cutoff
    tied = score == cutoff
    hits = wrong[above].sum() + (m - above.sum()) * wrong[tied].mean()
    return float(hits / m)


def ranking_auc(score, wrong, *, empty=None):
    """The probability that a wrong bag outscores a right one (Mann–Whitney; ties count half), non-empty rows only.

    Examples
    --------
    >>> ranking_auc([0.9, 0.5, 0.5, 0.1], [True, True, False, False])
    0.875
    """
    from scipy.stats import rankdata

    score, wrong = _kept(score, wrong, empty)
    n_wrong = int(wrong.sum())
    n_right = wrong.size - n_wrong
    if n_wrong == 0 or n_right == 0:
        raise InvalidDataError(
            f"the AUC needs wrong and right non-empty bags, got {n_wrong} wrong and {n_right} right"
        )
    ranks = rankdata(score)  # average ranks: a tie counts half
    return float((ranks[wrong].sum() - n_wrong * (n_wrong + 1) / 2) / (n_wrong * n_right))


AUDIT_TOPS = (0.05, 0.10)
"""The tops of the ranking whose precision a data set's audit reports, when its true labels are known."""


def audit_dataset(ds, *, features="minmax", n_neighbors=10, knn="auto", knn_options=None, learners="auto",
                  n_folds=DEFAULT_FOLDS, random_state=0):
    """:func:`audit_bags` of a data set's rows, in the features of pipeline ``features`` fitted on all rows.

    What ``pll audit`` runs.  The feature pipeline searches its own neighbors
    (if it does) with the same backend.  Rows with keys (a CSV or Parquet
    ``id`` column) also get their key, column ``id`` after ``row``.
    """
    from .preprocessing import make_features
    from .neighbors import use_backend

    transformer = use_backend(make_features(features), knn, knn_options)
    X = np.asarray(transformer.fit_transform(ds.X), dtype=np.float64)
    table = audit_bags(X, ds.S, n_neighbors=n_neighbors, knn=knn, knn_options=knn_options, classes=ds.classes,
                       learners=learners, n_folds=n_folds, random_state=random_state)
    if ds.ids is not None:
        table.insert(1, "id", ds.ids[table["row"].to_numpy()])
    return table


def audit_metrics(table, ds) -> dict:
    """What an audit of ``ds`` found: rows, empty bags, suspicion; with true labels, how well it ranks the wrong bags.

    ``weight_<source>`` are the audit's mixture weights (``table.attrs``), when the table has them.
    ``wrong_bags`` are the non-empty bags without their row's true label,
    ``base_rate`` their share (the precision of a random ranking); then
    ``auc`` (:func:`ranking_auc`) and ``precision_top_<q>`` for each q of
    :data:`AUDIT_TOPS` (:func:`precision_at_top`), all over non-empty rows.
    """
    rows = table["row"].to_numpy()
    empty = table["empty_bag"].to_numpy(bool)
    out = {"rows": float(rows.size), "empty_bags": float(empty.sum()),
           "mean_suspicion": float(table.loc[~empty, "suspicion"].mean()) if (~empty).any() else float("nan")}
    out.update({f"weight_{source}": float(w) for source, w in table.attrs.get("mixture_weights", {}).items()})
    if ds.y is None:
        return out
    wrong = ~ds.S[rows, ds.y[rows]] & ~empty
    score = table["suspicion"].to_numpy()
    out.update(wrong_bags=float(wrong.sum()), base_rate=float(wrong[~empty].mean()))
    if 0 < wrong.sum() < (~empty).sum():
        out["auc"] = ranking_auc(score, wrong, empty=empty)
        out.update({f"precision_top_{q:.2f}": precision_at_top(score, wrong, q, empty=empty) for q in AUDIT_TOPS})
    return out


# --- helpers -------------------------------------------------------------------------------------


def _refined_votes(bags, votes, idx, w, base):
    """``q_j`` of every neighbor ``j = idx[i, t]`` as row ``i`` sees it, shape (n, k, l), in row blocks.

    Row ``i``'s vote in ``r_j`` gets weight 0 rather than being subtracted
    afterwards, so that ``q_j`` does not depend on ``bags[i]`` even in the last bit.
    """
    n, k = idx.shape
    n_classes = bags.shape[1]
    out = np.empty((n, k, n_classes))
    block = max(1, _BLOCK_CELLS // (k * k * n_classes))
    for lo in range(0, n, block):
        rows = np.arange(lo, min(n, lo + block))
        J = idx[rows]  # (b, k): the neighbors j of each row i
        M = idx[J]  # (b, k, k): the neighbors m of each j
        r = np.einsum("bjm,bjml->bjl", np.where(M != rows[:, None, None], w[J], 0.0), votes[M]) + base
        q = np.where(bags[J], r, 0.0)
        total = q.sum(axis=2, keepdims=True)
        out[rows] = q / np.where(total > 0, total, 1.0)
    return out


def _cross_fitted(X, bags, learners, n_folds, random_state):
    """The out-of-fold probabilities of every learner (a list of (n, l) arrays), one fold fit after another."""
    if not learners:
        return []
    from sklearn.base import clone

    X = check_features(X, "audit: X")
    n, n_classes = bags.shape
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(seed_to_int(random_state)).permutation(n)] = np.arange(n) % n_folds
    spoken = bags.any(axis=1)
    out = [np.zeros((n, n_classes)) for _ in learners]
    steps = [(s, f) for s in range(len(learners)) for f in range(n_folds)]
    sizes = np.cumsum([0] + [int((fold == f).sum()) for _, f in steps])
    slices = [slice(int(lo), int(hi)) for lo, hi in zip(sizes[:-1], sizes[1:])]
    what = f"audit: {len(learners)} learner{'s' * (len(learners) > 1)} cross-fitted on {n_folds} folds (rows x learners)"
    for _, (s, f) in zip(track(slices, what), steps):  # the loop first: its last report comes after its last block
        train = (fold != f) & spoken
        if not train.any():
            raise InvalidDataError(f"fold {f + 1} of {n_folds}: every other row's bag is empty; nothing to learn from")
        model = clone(learners[s]).fit(X[train], bags[train])
        test = fold == f
        out[s][test] = _class_columns(model, model.predict_proba(X[test]), n_classes)
    return out


def _class_columns(model, proba, n_classes):
    """A learner's probabilities over the audit's l classes (its ``classes_`` are column indices of the bags)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.shape[1] == n_classes:
        return proba
    full = np.zeros((proba.shape[0], n_classes))
    full[:, np.asarray(model.classes_, dtype=np.int64)] = proba
    return full


def _check_learners(learners, random_state):
    """The learners as a list (``"auto"``: :func:`default_learners`; None: none), each with fit and predict_proba."""
    if isinstance(learners, str):
        if learners != "auto":
            raise InvalidParameterError(f"learners must be 'auto', None or a sequence of estimators, got {learners!r}")
        return default_learners(random_state)
    if learners is None:
        return []
    try:
        learners = list(learners)
    except TypeError:
        raise InvalidParameterError(
            f"learners must be 'auto', None or a sequence of estimators, got {type(learners).__name__}"
        ) from None
    for learner in learners:
        if not (callable(getattr(learner, "fit", None)) and callable(getattr(learner, "predict_proba", None))):
            raise InvalidParameterError(
                f"a learner needs fit(X, S) and predict_proba(X), got {type(learner).__name__}"
            )
    return learners


def _check_folds(n_folds, n):
    n_folds = check_positive_int(n_folds, "n_folds")
    if not 2 <= n_folds <= n:
        raise InvalidParameterError(f"n_folds must be between 2 and the {n} rows, got {n_folds}")
    return n_folds


def _favoured(outside, labels):
    """The labels of probability at least half the row's largest outside its bag, and the same with their probabilities.

    ``outside`` holds -1 for the labels in the bag.
    """
    order = np.argsort(-outside, axis=1, kind="stable")
    top = outside.max(axis=1, keepdims=True)
    counts = ((outside >= 0.5 * top) & (outside >= 0)).sum(axis=1)
    names = labels.tolist()
    favoured, reason = [], []
    for row, p, count in zip(order.tolist(), outside.tolist(), counts.tolist()):
        favoured.append("|".join(names[c] for c in row[:count]))
        reason.append(", ".join(f"{names[c]} {p[c]:.2f}" for c in row[:count]))
    return favoured, reason


def _kept(score, wrong, empty):
    """Scores and truth of the non-empty rows, checked."""
    score = check_scores(score, "score")
    wrong = check_mask(wrong, "wrong", score.size)
    if empty is not None:
        keep = ~check_mask(empty, "empty", score.size)
        score, wrong = score[keep], wrong[keep]
    if score.size == 0:
        raise InvalidDataError("no non-empty bags to evaluate")
    return score, wrong


def _weights(distances, weights):
    if weights == "uniform":
        return np.ones_like(distances, dtype=np.float64)
    h = distances[:, -1:]
    scaled = np.divide(distances, h, out=np.zeros_like(distances, dtype=np.float64), where=h > 0)
    return np.exp(-(scaled**2))


def _joined(bags, labels):
    """Each row's classes in column order, joined by "|" (one string built per distinct bag)."""
    distinct, inverse = np.unique(bags, axis=0, return_inverse=True)
    strings = ["|".join(labels[bag]) for bag in distinct]
    return [strings[i] for i in inverse.ravel().tolist()]


def _suggested(support, labels):
    """The labels of support at least half the row's largest, by decreasing support (ties in class order)."""
    order = np.argsort(-support, axis=1, kind="stable")
    counts = (support >= 0.5 * support.max(axis=1, keepdims=True)).sum(axis=1)
    names = labels.tolist()
    return ["|".join([names[c] for c in row[:count]]) for row, count in zip(order.tolist(), counts.tolist())]


def _check_matrix(bags):
    bags = np.asarray(bags)
    if bags.ndim != 2 or bags.dtype != bool:
        raise InvalidDataError(f"bags must be a 2-d bool matrix, got shape {bags.shape} and dtype {bags.dtype}")
    if bags.shape[1] == 0:
        raise InvalidDataError("bags have no class columns")
    return bags


def _check_bags(X, S, classes):
    """The bags as a bool matrix over the classes, and the class names."""
    if S is None:
        raise InvalidDataError("no bags: S is None")
    if is_sparse(S):
        S = S.toarray()
    n = _n_rows(S)
    if X is not None:
        X = check_features(X, "audit: X")
        if X.shape[0] != n:
            raise InvalidDataError(f"X has {X.shape[0]} rows but S has {n} bags (row counts differ)")
    if classes is None:
        return encode_bags(S, n, what="bags")
    classes = np.asarray(classes)
    if classes.ndim != 1:
        raise InvalidParameterError(f"classes must be a 1-d sequence of names, got shape {classes.shape}")
    if np.unique(classes).size != classes.size:
        raise InvalidParameterError(f"classes must be distinct, got {classes.tolist()!r}")
    if label_sets(S) is None and np.ndim(S) == 2:  # a matrix: its columns are the classes, in order
        bags, _ = encode_bags(S, n, what="bags")
        if bags.shape[1] != classes.size:
            raise InvalidDataError(f"S has {bags.shape[1]} class columns but {classes.size} classes were named")
        return bags, classes
    return encode_bags(S, n, classes, what="bags")


def _n_rows(S):
    try:
        return S.shape[0] if hasattr(S, "shape") else len(S)
    except TypeError:
        raise InvalidDataError(f"S must be a bag matrix or a sequence of label sets, got {type(S).__name__}") from None


def _check_options(weights, prior, refine):
    """Refuse a bad ``weights``, ``prior`` or ``refine``; the prior as a float."""
    if not isinstance(weights, str) or weights not in WEIGHTS:
        raise InvalidParameterError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    if isinstance(prior, bool) or not isinstance(prior, Real) or not math.isfinite(prior) or prior <= 0:
        raise InvalidParameterError(f"prior must be a finite number > 0, got {prior!r}")
    if not isinstance(refine, (bool, np.bool_)):
        raise InvalidParameterError(f"refine must be True or False, got {refine!r}")
    return float(prior)


def _check_k(n_neighbors):
    return check_positive_int(n_neighbors, "n_neighbors")


def _take(neighbors, n, n_neighbors):
    if not isinstance(neighbors, NeighborResult):
        raise InvalidParameterError(
            f"neighbors must be a pll.neighbors.NeighborResult, got {type(neighbors).__name__}"
        )
    k = neighbors.k if n_neighbors is None else _check_k(n_neighbors)
    return neighbors.take(k, n, self_excluded=True)


def _own_neighbors(X, n, n_neighbors, knn, knn_options, neighbors):
    """The rows' own neighbors, self excluded: ``neighbors`` checked and cut, or a fresh search."""
    k = _check_k(n_neighbors)
    if neighbors is not None:
        return _take(neighbors, n, k)
    if X is None:
        raise InvalidDataError("X is None: pass the features, or precomputed neighbors")
    if knn_options is not None and not isinstance(knn_options, dict):
        raise InvalidParameterError(f"knn_options must be a dict of backend options, got {type(knn_options).__name__}")
    check_backend(knn, knn_options)
    return kneighbors(X, None, k=k, backend=knn, **(knn_options or {}))
