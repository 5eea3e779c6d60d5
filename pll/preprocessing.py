"""Feature pipelines: scikit-learn transformers fitted on training rows only.

``fit_transform`` gives the training rows' features and ``transform`` those of
new rows, with every statistic taken from the training rows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.utils._param_validation import Interval, StrOptions

from .data import PartialLabelDataset
from .errors import InvalidDataError, InvalidParameterError, NotFittedError
from .neighbors import NeighborIndex, kneighbors, use_backend
from .neighbors.registry import backend_options
from .neighbors.subsets import own_neighbors_from, restrict_neighbors, subset_list_length
from .utils.progress import row_blocks, track
from .utils.validation import check_params, check_X

_EPS = 1e-12
VARIANTS = {"real-world": 0.1, "vision": 0.25}  # variant -> default smoothing strength alpha
SEARCH_EPSILON = 0.05
"""pynndescent's query breadth for :class:`PlAknnPreprocessor`'s searches of new rows (its smoothing and
density steps), narrower than a method's (:data:`pll.neighbors.nndescent.QUERY_BREADTH`): a neighbor
missed there moves a row by a fraction of ``alpha``, or changes a mean over ``density_k`` distances by a
fraction of one, where a method's vote would change.  Measured on the scale table (640,000 fitting rows,
20,000 new rows; seconds on both cores, recall@10 of the smoothing and @50 of the density step, the new
rows' features against those from exact neighbors, relative error at the 99th percentile):

=======  =============  =============  =============  =============
epsilon  0.2            0.1            0.05           0
seconds  1.2 + 4.3      1.0 + 2.8      0.9 + 2.4      0.7 + 1.9
recall   0.996 / 0.999  0.985 / 0.996  0.970 / 0.992  0.943 / 0.983
error    0.007          0.011          0.015          0.021
=======  =============  =============  =============  =============

(At 0.2 the smoothing's 1.2 s is from :data:`~pll.neighbors.nndescent.QUERY_BREADTH`'s sweep: here its first
search compiled.)  The methods' breadth, used before, is 0.2 for the smoothing and 0.1 for the density step
(4.0 s).  Half the rows' features are exact at every breadth; the largest errors (0.55-0.63) are at every
breadth too: a few rows whose graph search misses most neighbors."""


def _pca(n_components=0.95, **params):
    return make_pipeline(StandardScaler(), PCA(n_components=n_components, svd_solver="full", **params))


FEATURE_PIPELINES = {
    "minmax": MinMaxScaler,
    "standard": StandardScaler,
    "pca": _pca,
    "pl_aknn_real": lambda **params: PlAknnPreprocessor(variant="real-world", **params),
    "pl_aknn_vision": lambda **params: PlAknnPreprocessor(variant="vision", **params),
}


_SPEC = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\((?P<params>.*)\))?\s*$", re.S)


def parse_feature_spec(spec):
    """A feature pipeline's name and parameters from its spec: ``name`` or ``name(key=value, ...)``.

    Values are JSON (numbers, ``true``, ``"text"``) or else plain text.  The
    spec names the pipeline everywhere a run does (grids, MLflow, its
    neighbor stage), so that ``pl_aknn_real(density_k=100)`` is a pipeline
    of its own beside ``pl_aknn_real``.

    Examples
    --------
    >>> parse_feature_spec("pl_aknn_real(density_k=100, alpha=0.2)")
    ('pl_aknn_real', {'density_k': 100, 'alpha': 0.2})
    """
    match = _SPEC.match(str(spec))
    if match is None:
        raise InvalidParameterError(f"feature pipeline {spec!r}: expected a name, or name(key=value, ...)")
    params = {}
    for item in filter(str.strip, (match["params"] or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InvalidParameterError(f"feature pipeline {spec!r}: {item.strip()!r} is not key=value")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value.strip()
    return match["name"], params


def make_features(name="minmax", **params):
    """A fresh, unfitted transformer for the named feature pipeline (a name or a spec, :func:`parse_feature_spec`).

    ``minmax`` and ``standard`` scale each feature; ``pca`` standardizes and
    keeps the principal components explaining 95 % of the variance (or
    ``n_components``); ``pl_aknn_real`` and ``pl_aknn_vision`` are
    :class:`PlAknnPreprocessor`'s two variants.  ``params`` go to the
    transformer, over those of the spec; their values are checked here.

    Examples
    --------
    >>> make_features("pl_aknn_vision", n_components=10)
    PlAknnPreprocessor(n_components=10, variant='vision')
    >>> make_features("pl_aknn_real(density_k=100)")
    PlAknnPreprocessor(density_k=100)
    """
    name, given = parse_feature_spec(name)
    if name not in FEATURE_PIPELINES:
        raise InvalidParameterError(
            f"unknown feature pipeline {name!r}: choose one of {', '.join(FEATURE_PIPELINES)}"
        )
    try:
        transformer = FEATURE_PIPELINES[name](**{**given, **params})
        check_params(transformer)
    except (TypeError, InvalidParameterError) as exc:
        raise InvalidParameterError(f"feature pipeline {name!r}: {exc}") from None
    return transformer


def shares_fit_neighbors(spec):
    """Whether the pipeline ``spec`` gives a subset of its rows their neighbors from its own fit (see :func:`featurize`)."""
    return bool(getattr(make_features(spec), "projection_is_fixed", False))


@dataclass(frozen=True, eq=False)
class FeatureSplit:
    """A train/test split with its features transformed by a pipeline fitted on the training rows.

    ``train`` and ``test`` hold the transformed features (``X_train`` and
    ``X_test``, the same arrays): a split keeps no copy of the raw features,
    which at a million rows would be a quarter of a GiB per split.
    """

    train: PartialLabelDataset
    test: PartialLabelDataset
    X_train: np.ndarray
    X_test: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray
    features: str
    params: dict = field(default_factory=dict)
    subset_neighbors: np.ndarray | None = None
    """Given ``subset`` to :func:`featurize`: the subset's rows' neighbors that the pipeline's fit searched, among
    the subset (:attr:`PlAknnPreprocessor.subset_neighbors_`), for the subset's own featurize; else None."""


def featurize(ds, train_rows, test_rows, name="minmax", params=None, knn="auto", knn_options=None, *,
              subset=None, fit_neighbors=None, return_transformer=False):
    """Fit the named feature pipeline on the training rows of ``ds`` and transform both parts.

    ``test_rows`` may be any rows treated as new (test or validation rows).
    A pipeline that searches neighbors (PL A-kNN's preprocessing) does so with
    the backend ``knn`` and its options ``knn_options``, unless ``params`` set them.

    The hold-out split fits the same pipeline on a subset of these training
    rows.  Where the pipeline's fit searches neighbors in a projection that
    learns nothing from the rows (:attr:`PlAknnPreprocessor.projection_is_fixed`),
    one search serves both: ``subset`` (positions in ``train_rows``) has this
    fit keep the subset's neighbors among itself as
    :attr:`FeatureSplit.subset_neighbors`, which the subset's featurize takes as
    ``fit_neighbors`` instead of searching again.  Other pipelines ignore both.

    ``return_transformer``: also return the fitted pipeline, ``(split, transformer)``, for a model that
    ships it; a split kept between stages does not hold it.
    """
    params = dict(params or {})
    train, test = ds.subset(train_rows), ds.subset(test_rows)
    transformer = use_backend(make_features(name, **params), knn, knn_options, keep=params)
    shares = getattr(transformer, "projection_is_fixed", False)
    fit_params = {"neighbors": fit_neighbors, "subset": subset} if shares else {}
    fitted = train.with_features(np.asarray(transformer.fit_transform(train.X, **fit_params), dtype=np.float64))
    new = test.with_features(np.asarray(transformer.transform(test.X), dtype=np.float64))
    subset_neighbors = getattr(transformer, "subset_neighbors_", None) if shares else None
    if subset_neighbors is not None:
        subset_neighbors = subset_neighbors.astype(np.int32)  # kept between stages: half the bytes
    split = FeatureSplit(
        fitted, new, fitted.X, new.X, np.asarray(train_rows), np.asarray(test_rows), name, params, subset_neighbors,
    )
    return (split, transformer) if return_transformer else split


def _l2_rows(X):
    return X / (np.linalg.norm(X, axis=1, keepdims=True) + _EPS)


class PlAknnPreprocessor(TransformerMixin, BaseEstimator):
    """The feature preprocessing of the PL A-kNN paper (Appendix D.2, as the authors' code does it).

    1. ``"real-world"``: signed cube root ``sign(x)|x|^(1/3)``; ``"vision"``:
       centering with the training mean, then PCA to ``n_components``.
    2. L2 normalization of rows.
    3. Gaussian kNN smoothing: a row moves a fraction ``alpha`` towards the
       Gaussian-weighted mean (bandwidth: the median of its own neighbor
       distances) of its ``smooth_k`` nearest training rows, then is
       L2-normalized again.  Training rows are smoothed with the unsmoothed
       other training rows, new rows with the smoothed training rows.
    4. Local density transform: each row is divided by its mean distance to
       its ``density_k`` nearest smoothed training rows (other rows, for a
       training row).

    ``fit_transform(X)`` returns the training rows' representation (each row's
    neighbors exclude itself); ``transform(X)`` treats its rows as new, even
    when they are the training rows.  Neighbor counts are capped by the rows
    available: ``n - 1`` for training rows, ``n`` (smoothing) and ``n - 1``
    (density) for new rows.

    Parameters
    ----------
    variant : {"real-world", "vision"}
    alpha : float in [0, 1] or None
        Smoothing strength; None means 0.1 for real-world data, 0.25 for vision.
    smooth_k : int, default 10
    density_k : int, default 50
    n_components : int, default 50
        Vision only: PCA components (capped by the training rows and features).
    knn : str, default "auto"
        Backend of :func:`pll.neighbors.kneighbors`.
    knn_options : dict or None
        Options of that backend.

    Attributes
    ----------
    alpha_ : float
    mean_ : ndarray of shape (d,) or None
        Vision: the training mean.
    pca_ : PCA or None
    smoothed_ : ndarray of shape (n, d')
        The smoothed training rows (before the density transform).
    subset_neighbors_ : ndarray of shape (m, smooth_k) or None
        Given a ``subset`` to fit: its rows' nearest rows among the subset in
        the projection, positions in ``subset`` (-1: not found); else None.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(30, 4))
    >>> pre = PlAknnPreprocessor(variant="real-world", smooth_k=5, density_k=10)
    >>> Z = pre.fit_transform(X)
    >>> Z.shape, pre.transform(X[:3]).shape
    ((30, 4), (3, 4))
    """

    _expected_failed_checks = {
        "check_transformer_general": (
            "fit_transform gives the training rows' representation (each row left out of its own "
            "neighbors), transform treats its rows as new, so they differ on the same rows by design"
        ),
        "check_transformer_data_not_an_array": "fit_transform and transform differ on the same rows by design",
    }
    """scikit-learn checks this estimator fails, and why (``tests/unit/test_estimator_checks.py`` runs them)."""
    _parameter_constraints = {
        "variant": [StrOptions(VARIANTS.keys())],  # keys, not a set: the message lists them in order
        "alpha": [Interval(Real, 0.0, 1.0, closed="both"), None],
        "smooth_k": [Interval(Integral, 1, None, closed="left")],
        "density_k": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "knn": [str],
        "knn_options": [dict, None],
    }

    def __init__(
        self,
        variant="real-world",
        *,
        alpha=None,
        smooth_k=10,
        density_k=50,
        n_components=50,
        knn="auto",
        knn_options=None,
    ):
        self.variant = variant
        self.alpha = alpha
        self.smooth_k = smooth_k
        self.density_k = density_k
        self.n_components = n_components
        self.knn = knn
        self.knn_options = knn_options

    @property
    def projection_is_fixed(self):
        """True when steps 1 and 2 learn nothing from the training rows (real-world: cube root, L2).

        Then the smoothing neighbors of any subset of the rows can be read from
        the rows' own (``subset`` and ``neighbors`` of :meth:`fit`).
        """
        return self.variant == "real-world"

    def fit(self, X, y=None, *, neighbors=None, subset=None):
        """Learn the training statistics and the smoothed training rows; X of shape (n, d).

        Parameters
        ----------
        X : array of shape (n, d)
        y : ignored
        neighbors : int array of shape (n, >= smooth_k), optional
            Each row's nearest other rows in the projection, nearest first (-1:
            unknown), in place of fit's own search of step 3; rows with a -1
            among their first ``smooth_k`` are searched exactly.  Only with
            :attr:`projection_is_fixed`.
        subset : int array, optional
            Sorted positions of a subset of the rows (another fit's rows):
            search long enough lists to give them their ``smooth_k`` nearest
            among themselves too, kept as ``subset_neighbors_`` for that fit's
            ``neighbors``.  Only with :attr:`projection_is_fixed`.
        """
        self._fit(X, neighbors, subset)
        return self

    def fit_transform(self, X, y=None, *, neighbors=None, subset=None):
        """The training rows' representation, shape (n, d'); neighbors exclude each row itself (see :meth:`fit`)."""
        self._fit(X, neighbors, subset)
        return self._density(self.smoothed_, None)

    def transform(self, X):
        """The representation of new rows, shape (m, d'), against the fitted training rows."""
        if not hasattr(self, "smoothed_"):
            raise NotFittedError("PlAknnPreprocessor: call fit before transform")
        Z = self._project(check_X(self, X, reset=False))
        n = self.smoothed_.shape[0]
        smoothed = self._smooth(Z, self.smoothed_, self._smoothed_index().kneighbors(Z, min(self.smooth_k, n)))
        return self._density(smoothed, smoothed)

    def _fit(self, X, neighbors=None, subset=None):
        check_params(self)
        X = check_X(self, X, reset=True)
        self.alpha_ = VARIANTS[self.variant] if self.alpha is None else float(self.alpha)
        if X.shape[0] < 2:
            raise InvalidDataError(f"PlAknnPreprocessor: needs at least 2 training rows, got n_samples={X.shape[0]}")
        if (neighbors is not None or subset is not None) and not self.projection_is_fixed:
            raise InvalidParameterError(
                f"PlAknnPreprocessor: variant={self.variant!r} fits its projection on the rows, so it neither "
                "takes their neighbors nor gives a subset's"
            )
        if neighbors is not None and subset is not None:
            raise InvalidParameterError("PlAknnPreprocessor: give fit neighbors or a subset, not both")
        self.mean_, self.pca_ = None, None
        if self.variant == "vision":
            self.mean_ = X.mean(axis=0)
            n_components = min(self.n_components, X.shape[0], X.shape[1])
            self.pca_ = PCA(n_components=n_components, svd_solver="full").fit(X - self.mean_)
        Z = self._project(X)
        self.smoothed_ = self._smooth(Z, Z, self._smoothing_neighbors(Z, neighbors, subset))
        self._index = None
        self._smoothed_index()

    def _smoothing_neighbors(self, Z, neighbors, subset):
        """Step 3's neighbors of the training rows: given, or searched (longer, to serve a ``subset`` too)."""
        n = Z.shape[0]
        k = min(self.smooth_k, n - 1)
        self.subset_neighbors_ = None
        if neighbors is not None:
            return own_neighbors_from(Z, neighbors, k)
        if subset is None:
            return kneighbors(Z, None, k, self.knn, **self._search_options())
        subset = np.asarray(subset, dtype=np.int64)
        if subset.ndim != 1 or subset.size < 2 or np.any(np.diff(subset) <= 0) or subset[0] < 0 or subset[-1] >= n:
            raise InvalidParameterError(f"PlAknnPreprocessor: subset must be sorted distinct positions among {n} rows")
        nb = kneighbors(Z, None, max(k, subset_list_length(k, subset.size / n, n)), self.knn, **self._search_options())
        self.subset_neighbors_ = restrict_neighbors(nb.indices, subset, min(self.smooth_k, subset.size - 1))
        return nb.take(k)

    def _project(self, X):
        """Steps 1 and 2: cube root or centering + PCA, then L2 normalization."""
        if self.variant == "vision":
            Z = self.pca_.transform(X - self.mean_)
        else:
            Z = np.cbrt(X)
        return _l2_rows(Z)

    def _smoothed_index(self):
        """One neighbor index over the smoothed training rows, for every later search (built by fit).

        It serves the density step of the training rows and both steps of new
        rows, so their searches share one build.  Not pickled: rebuilt on first use after loading.
        """
        if getattr(self, "_index", None) is None:
            n = self.smoothed_.shape[0]
            k = max(min(self.smooth_k, n), min(self.density_k, n - 1))
            self._index = NeighborIndex(self.smoothed_, k, self.knn, **self._search_options())
        return self._index

    def _search_options(self):
        """The backend's options for this transformer's searches, which measure no recall: nothing reports it.

        A backend that takes a query breadth searches new rows with
        :data:`SEARCH_EPSILON`, unless the options set one.
        """
        options = {**(self.knn_options or {}), "recall_sample": 0}
        if "epsilon" in backend_options(self.knn, options):
            options.setdefault("epsilon", SEARCH_EPSILON)
        return options

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_index", None)
        return state

    def _smooth(self, Z, neighbor_rows, nb):
        """Step 3: move each row towards the Gaussian-weighted mean of its neighbors, then L2-normalize.

        Block by block through :func:`pll.utils.progress.track`: at a million rows this loop takes minutes, so it
        reports progress and stops between blocks when asked (another stage of the run failed).
        """
        sigma = np.median(nb.distances, axis=1, keepdims=True) + _EPS
        w = np.exp(-(nb.distances**2) / (2.0 * sigma**2))
        w /= w.sum(axis=1, keepdims=True) + _EPS
        mean = np.empty_like(Z)
        gathered = 8 * nb.indices.shape[1] * Z.shape[1]  # bytes per row of the gathered (rows, k, d) neighbors
        for rows in track(row_blocks(Z.shape[0], gathered), f"{type(self).__name__} smoothing"):
            mean[rows] = np.einsum("qk,qkd->qd", w[rows], neighbor_rows[nb.indices[rows]])
        return _l2_rows((1.0 - self.alpha_) * Z + self.alpha_ * mean)

    def _density(self, smoothed, query):
        """Step 4: divide each row by its mean distance to its nearest smoothed training rows."""
        nb = self._smoothed_index().kneighbors(query, min(self.density_k, self.smoothed_.shape[0] - 1))
        return smoothed / (nb.distances.mean(axis=1, keepdims=True) + _EPS)
