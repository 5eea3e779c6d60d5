"""PRODEN (Lv et al., ICML 2020): a network trained on every candidate, weighted by its own belief in it."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from threadpoolctl import threadpool_limits
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions

from .._random import seed_to_int
from ..neighbors import kneighbors
from ..progress import blocks, track
from ..validation import check_params, check_X, encode_bags
from .pl_classifier import (
    INIT_NEIGHBORS,
    INITIALISATIONS,
    BagWeightClassifier,
    _fit_inner,
    _inner_proba,
    _class_balance,
    _prior_corrected,
    _restricted,
    check_init_rows,
    initial_weights,
    standardization,
)

CHUNK_COPIES = 2**16
"""(row, candidate) copies gathered per ``partial_fit`` call: the expanded rows are never copied whole."""
MIN_STEPS_PER_EPOCH = 20
"""Gradient steps an epoch takes at least: on small data the batches shrink (iris, 96 training rows and
about 250 copies, would otherwise take one step per epoch and end its 50 epochs barely trained)."""
PREDICT_ROWS = 2**14
"""Rows per block when a network predicts: its hidden activations stay near 32 MiB per 256 units."""


class Proden(BagWeightClassifier):
    """PRODEN: a multi-layer perceptron trained on every (row, candidate) pair, reweighted each epoch by itself.

    Progressive identification of true labels (Lv, Xu, Feng, Niu, Geng,
    Sugiyama, ICML 2020).  Each training row ``i`` counts once per candidate
    ``c`` of its bag ``S_i``, with weight ``w_ic`` (a row's weights sum to 1,
    zero outside the bag), and the network minimises the weighted
    cross-entropy ``Σ_i Σ_c w_ic (−log p_c(x_i))``.  After every chunk of
    copies (an epoch, on data of fewer than :data:`CHUNK_COPIES` copies) the
    weights of the chunk's rows become the network's probabilities
    restricted to the bag and renormalised, so the network's growing
    certainty about the easy rows sharpens the targets of the hard ones.  With
    ``neighbor_weight`` ``β > 0`` the new weights restrict
    ``(1 − β) p(x_i) + β · mean_j w_j`` instead, the mean over the row's 10
    nearest training rows (standardized features, the ``auto`` search): a
    row's neighbors vote on its bag, as IPAL's propagation does, where the
    network alone is unsure.  An empty bag counts as all classes.

    With ``class_balance`` (the default) every epoch weighs each class's
    copies so that all classes carry the same total weight, and the
    prediction moves the networks' probabilities back to the classes' shares
    of the final weights by Bayes' rule (``class_prior_``).  Without it a
    frequent label that shares its bags with rarer ones takes their rows:
    uniform start weights give it the most mass, the network learns it
    everywhere, and the reweighting locks it in.

    The network is scikit-learn's :class:`~sklearn.neural_network.MLPClassifier`
    (ReLU, Adam), fitted epoch by epoch with ``partial_fit`` on shuffled
    chunks of :data:`CHUNK_COPIES` copies: memory holds ``X`` and one chunk,
    never the whole expansion.  Features are transformed inside the
    estimator: a signed cube root (``cube_root``), then standardized (zero
    mean, unit variance, learned at ``fit``), since Adam's steps and the L2
    penalty assume features on one scale; no feature pipeline is needed in
    front of it.

    ``n_networks`` networks, from different seeds, are trained this way
    independently; the prediction averages their probabilities.  One network
    is a noisy estimate, and five made the prediction better on both
    real-world sets: over 5 splits (80/20, ``neighbor_weight=0``, no
    ``class_balance``), bird-song 73.6 % against 73.4 %
    with one, msrc-v2 55.1 % against 54.0 %, for 7 times the fit time
    (``benchmarks/proden.py`` measures each choice of the defaults).

    Its reject option is shared with :class:`pll.PlClassifier`: accept iff
    the top probability is ``>= threshold`` (the DST-PLL paper's rule for
    its competitors), the score is that probability; reasons ``conflict``
    (the runner-up within ``conflict_margin``) or ``low_score``.  It needs
    no neighbors (the ``neighbors`` arguments are accepted and ignored),
    but searches the training rows' own 10 neighbors for ``neighbor_weight``
    (and for a kNN ``init``).

    Parameters
    ----------
    cube_root : bool, default=True
        Take ``sign(x) |x|^(1/3)`` of every feature before standardizing:
        it compresses heavy tails (bird-song's features reach 10^5 with a
        median of 0.09; msrc-v2's are sparse histograms) so that a few
        extreme values do not dominate the first layer.  On msrc-v2 it
        raised the test accuracy by 4 points (``benchmarks/proden.py``).
        For non-negative features a min-max scaling in front changes
        nothing (the root of ``x / max`` is the root of ``x`` rescaled).
    hidden_layer_sizes : tuple of int, default=(256,)
        Units of each hidden layer.
    alpha : float >= 0, default=1e-4
        L2 penalty of the network (scikit-learn's, divided by the weight of
        each minibatch).
    learning_rate_init : float > 0, default=1e-3
        Adam's step size.
    batch_size : int, default=256
        Copies per gradient step, at most: an epoch takes at least
        :data:`MIN_STEPS_PER_EPOCH` steps, with smaller batches on small data.
    max_epochs : int, default=50
        Epochs over all copies.
    max_steps : int, default=20000
        Fewer epochs where ``max_epochs`` would take more gradient steps
        per network (at least one epoch): large data needs fewer passes, and
        its weights move after every chunk.  At 1,000,000 rows of bags of
        2.5 labels it leaves 2 epochs; bird-song's 50 epochs (8,700 copies) take 1,700 steps.
    n_networks : int, default=5
        Networks averaged, each with its own seed and weights.
    class_balance : bool, default=True
        Train on class-balanced weights and correct the prediction by the
        class prior, as above.  Over 5 splits (80/20) with the other
        defaults it raised the test accuracy on msrc-v2 from 55.1 % to
        65.6 %, on bird-song from 75.1 % to 76.4 %, and on lost (a
        real-world set the project does not ship) from 59.9 % to 65.0 %
        (``benchmarks/proden.py --variants defaults "no class balance"``).
    neighbor_weight : float in [0, 1), default=0.5
        ``β`` above: the share of the neighbors' mean weights in each
        reweighting; 0 is PRODEN as published.  Over 5 splits (80/20) with
        the other defaults but before ``class_balance``, 0.5 reached 75.1 %
        on bird-song against 73.6 % for 0, and 55.1 % on msrc-v2 with
        either; one network with 0.3 gave 74.4 % on bird-song.
    init : {"uniform", "pl_knn", "ipal", "auto"}, default="uniform"
        Initial weights, as in :class:`pll.PlClassifier` (computed on the
        standardized features): uniform over the bag, or a kNN method's
        disambiguation; ``"pl_knn"`` and ``"ipal"`` need at least 11 rows,
        ``"auto"`` is IPAL's on more than 10 rows and uniform on fewer.  Uniform by
        default, so that the method needs no neighbor search: IPAL's start
        gained 0.3 points on bird-song and 0.6 on msrc-v2, within the
        spread over splits.
    threshold : float in [0, 1], default=0.9
        Accept iff the top probability is ``>= threshold``.
    conflict_margin : float in [0, 1], default=0.2
        ``conflict`` when the runner-up's probability is within this margin.
    random_state : int or None, default=None
        Seed of the networks' initial weights, of the order of the copies and
        of the kNN start; None draws fresh randomness, as in scikit-learn.
        Ties among top probabilities are drawn keyed by (seed, row position).

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
        The class labels (``arange(l)`` when fitted on a 0/1 matrix).
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_`` (empty bags stay empty here).
    mean_, scale_ : ndarray of shape (d,)
        The standardization of the (cube-rooted) features: ``(X - mean_) /
        scale_`` (a constant feature has scale 1).
    networks_ : list of estimators
        The fitted networks (a :class:`~sklearn.dummy.DummyClassifier` when
        every bag holds the same single class).
    weights_ : ndarray of shape (n, l), float64
        The networks' final weights, averaged: each row's distribution over
        its bag; :meth:`disambiguate` reads them.
    class_prior_ : ndarray of shape (l,) or None
        The classes' shares of ``weights_``, which the prediction is
        corrected to; None without ``class_balance``.
    n_epochs_ : int
        Epochs each network ran (see ``max_steps``).
    weight_changes_ : ndarray of shape (n_networks, n_epochs_)
        Each epoch's change of the weights: the mean over rows of the
        total-variation distance between old and new weights.

    Notes
    -----
    Time is ``n_networks × n_epochs_`` passes over ``Σ_i |S_i|`` copies
    (an empty bag counts ``l``), plus a prediction of each chunk's rows for
    the reweighting.  Memory: ``X`` standardized (a copy), the
    weights (``n × l``, three copies while a network trains), one chunk of
    copies and a block of activations.  Measured at 1,000,000 rows × 32
    features, 20 classes (2,500,837 copies; ``benchmarks/proden.py --rows
    1000000``, BLAS on one thread, alone on two cores): 278 s for 5
    networks × 2 epochs, of which 6 s the 10-neighbor search of
    ``neighbor_weight`` (pynndescent's at that size), 2.97 GiB peak for the
    whole benchmark.

    Examples
    --------
    >>> import numpy as np, pll
    >>> X = np.array([[0.0], [0.2], [0.4], [0.6], [1.0], [1.2], [1.4], [1.6]])
    >>> S = [{"a", "b"}, {"a"}, {"a", "c"}, {"a"}, {"b", "c"}, {"c"}, {"c"}, {"a", "c"}]
    >>> clf = pll.Proden(max_epochs=30, n_networks=1, random_state=0).fit(X, S)
    >>> clf.classes_.tolist(), clf.predict([[0.1], [1.5]]).tolist()
    (['a', 'b', 'c'], ['a', 'c'])
    >>> r = clf.predict_with_reject([[0.1], [1.5]])
    >>> bool(((r.score >= clf.threshold) == r.accept).all())
    True
    """

    _parameter_constraints = {
        "cube_root": ["boolean"],
        "hidden_layer_sizes": [tuple, list],  # of positive ints: _validate_params
        "alpha": [Interval(Real, 0, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "max_steps": [Interval(Integral, 1, None, closed="left")],
        "n_networks": [Interval(Integral, 1, None, closed="left")],
        "neighbor_weight": [Interval(Real, 0, 1, closed="left")],
        "class_balance": ["boolean"],
        "init": [StrOptions(set(INITIALISATIONS))],
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "conflict_margin": [Interval(Real, 0, 1, closed="both")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        hidden_layer_sizes=(256,),
        *,
        cube_root=True,
        alpha=1e-4,
        learning_rate_init=1e-3,
        batch_size=256,
        max_epochs=50,
        max_steps=20_000,
        n_networks=5,
        neighbor_weight=0.5,
        class_balance=True,
        init="uniform",
        threshold=0.9,
        conflict_margin=0.2,
        random_state=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.cube_root = cube_root
        self.alpha = alpha
        self.learning_rate_init = learning_rate_init
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.n_networks = n_networks
        self.neighbor_weight = neighbor_weight
        self.class_balance = class_balance
        self.init = init
        self.threshold = threshold
        self.conflict_margin = conflict_margin
        self.random_state = random_state

    def _validate_params(self):
        """scikit-learn's checks of ``_parameter_constraints``, and positive layer sizes, which they cannot say.

        So that :func:`pll.validation.check_params` (``fit``, a grid, the
        command line) refuses ``(0,)`` before anything runs, not the network
        at its first epoch.
        """
        super()._validate_params()
        sizes = self.hidden_layer_sizes
        if not (len(sizes) > 0 and all(isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in sizes)):
            raise InvalidParameterError(
                f"The 'hidden_layer_sizes' parameter of {type(self).__name__} must be a non-empty tuple of "
                f"positive ints. Got {sizes!r} instead."
            )

    def fit(self, X, S, neighbors=None):
        """Train the networks on the weighted copies, reweighting after every epoch.

        Parameters
        ----------
        X : array-like of shape (n, d)
        S : candidate sets of the n rows
            A 0/1 or bool matrix of shape (n, l), dense or scipy sparse; a
            sequence of n label sets; or 1-d labels of shape (n,).
        neighbors : NeighborResult, optional
            Ignored.

        Returns
        -------
        self
        """
        check_params(self)
        X = check_X(self, X, reset=True)
        n = X.shape[0]
        check_init_rows(self, n)
        S_train, classes = encode_bags(S, n)
        bags = np.where(S_train.any(axis=1, keepdims=True), S_train, True)
        self.mean_, self.scale_ = standardization(np.cbrt(X) if self.cube_root else X)
        Z = self._standardized(X)
        seed = seed_to_int(self.random_state)

        rows, cols = np.nonzero(bags)  # the expansion, grouped by row
        self._inner_classes = np.unique(cols)
        self.S_train_, self.classes_, self.n_classes_ = S_train, classes, len(classes)
        start = initial_weights(self.init, Z, bags, seed)
        if self._inner_classes.size < 2:  # every copy has the same label: nothing to disambiguate
            model, _ = _fit_inner(None, Z[rows], cols, start[rows, cols])
            self.networks_, self.weights_, self.class_prior_ = [model], start, None
            self.n_epochs_ = 0
            self.weight_changes_ = np.zeros((self.n_networks, 0))
            return self
        self._train_neighbors = self._own_neighbors(Z, seed)
        self.networks_, total, changes = [], np.zeros(bags.shape), []
        for k in range(self.n_networks):  # one network's weights at a time: n x l each
            # BLAS on one thread: minibatch products are too small to share, and on two busy cores
            # threads made a bird-song network 12 times slower (56 s against 4.7 s).
            with threadpool_limits(1):
                net, W, network_changes = self._train(Z, bags, rows, cols, start, seed, k)
            self.networks_.append(net)
            total += W
            changes.append(network_changes)
        self.weights_ = total / self.n_networks
        self.class_prior_ = self.weights_.mean(axis=0) if self.class_balance else None
        del self._train_neighbors
        self.weight_changes_ = np.array(changes)
        self.n_epochs_ = self.weight_changes_.shape[1]
        return self

    def _own_neighbors(self, Z, seed):
        """Indices of every training row's nearest other rows (at most 10), or None without ``neighbor_weight``."""
        k = min(INIT_NEIGHBORS, Z.shape[0] - 1)
        if self.neighbor_weight == 0 or k < 1:
            return None
        return kneighbors(Z, None, k=k, backend="auto", random_state=seed).indices

    def _standardized(self, X):
        """The network's input: ``X`` cube-rooted (``cube_root``), standardized, in float32.

        Single precision halves the networks' arithmetic and memory (scikit-learn's
        perceptron keeps its input's precision); standardized inputs need no more.
        """
        return (((np.cbrt(X) if self.cube_root else X) - self.mean_) / self.scale_).astype(np.float32)

    def _train(self, Z, bags, rows, cols, W, seed, k):
        """Network ``k``: epochs over shuffled chunks of copies, reweighting after each; (net, weights, changes)."""
        from sklearn.neural_network import MLPClassifier

        rng = np.random.default_rng([seed, k])
        net = MLPClassifier(
            hidden_layer_sizes=tuple(self.hidden_layer_sizes),
            alpha=self.alpha,
            batch_size=self.batch_size,
            learning_rate_init=self.learning_rate_init,
            shuffle=False,  # the copies come shuffled, chunk by chunk
            random_state=int(rng.integers(2**31)),
        )
        m, changes, W = rows.size, [], W.copy()
        classes = np.arange(W.shape[1])
        ones = np.ones(classes.size)
        batch = min(self.batch_size, -(-m // MIN_STEPS_PER_EPOCH))
        epochs = self._epochs(m)
        # One progress stream over all epochs: the copies of epoch e are positions e*m .. (e+1)*m.
        parts = [slice(e * m + b.start, e * m + b.stop) for e in range(epochs) for b in blocks(m, CHUNK_COPIES)]
        for part in track(parts, f"Proden network {k + 1} of {self.n_networks} (copies x {epochs} epochs)"):
            epoch, first = divmod(part.start, m)
            if first == 0:
                order, before = rng.permutation(m), W.copy()
                # Each class's factor for the epoch: every class the same total weight (1 without class_balance).
                factor = _class_balance(classes, W.sum(axis=0), classes.size)[0] if self.class_balance else ones
            chunk = order[first:first + part.stop - part.start]
            net.batch_size = min(batch, chunk.size)  # a short last chunk: no clipping warning
            net.partial_fit(Z[rows[chunk]], cols[chunk], classes=self._inner_classes,
                            sample_weight=W[rows[chunk], cols[chunk]] * factor[cols[chunk]])
            self._reweight(W, net, Z, bags, np.unique(rows[chunk]))
            if part.stop == (epoch + 1) * m:
                changes.append(float(0.5 * np.abs(W - before).sum(axis=1).mean()))
        return net, W, changes

    def _epochs(self, copies):
        """``max_epochs``, fewer where they would take more than ``max_steps`` gradient steps (at least one)."""
        steps_per_epoch = -(-copies // min(self.batch_size, -(-copies // MIN_STEPS_PER_EPOCH)))
        return max(1, min(self.max_epochs, self.max_steps // steps_per_epoch))

    def _reweight(self, W, net, Z, bags, rows):
        """Set the weights of ``rows`` to the network's probabilities, restricted to their bags and renormalised.

        After each chunk of copies, for the rows it held (PRODEN's update
        after each minibatch, a chunk at a time): on small data a chunk is
        an epoch; on large data the weights move many times per epoch.
        """
        nb, beta = self._train_neighbors, self.neighbor_weight
        for b in blocks(rows.size, PREDICT_ROWS):
            these = rows[b]
            P = _inner_proba(net, self._inner_classes, Z[these], self.n_classes_)
            if nb is not None:
                P = (1 - beta) * P + beta * W[nb[these]].mean(axis=1)
            W[these] = _restricted(P, bags[these])

    def _proba(self, X):
        """The networks' mean probabilities for checked ``X``, block by block, rows summing to 1 in float64."""
        P = np.zeros((X.shape[0], self.n_classes_))
        for b in blocks(X.shape[0], PREDICT_ROWS):
            Z = self._standardized(X[b])
            for net in self.networks_:
                P[b] += _inner_proba(net, self._inner_classes, Z, self.n_classes_)
        P /= P.sum(axis=1, keepdims=True)  # the networks' float32 rows sum to 1 within 1e-7 only
        return _prior_corrected(P, self.class_prior_)

    def fit_summary(self):
        """How the training ended, for a run's log: epochs, networks, the mean weight change of the last epoch."""
        self._check_fitted()
        last = self.weight_changes_[:, -1].mean() if self.n_epochs_ else 0.0
        return {"epochs": self.n_epochs_, "networks": self.n_networks, "weight_change": float(last)}
