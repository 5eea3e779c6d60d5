"""Scoring new rows with a method fitted on a whole data set.

Benchmarks say which method to trust; this module is what runs it on a user's
own data, which has features (and perhaps candidate bags) but no ground truth.
A :class:`FittedModel` bundles everything scoring needs — the fitted feature
transformer and the fitted method, which holds the training features and bags
its neighbor search runs against — so that it can be pickled, shipped and
loaded elsewhere.  Input tables are matched to the model's features *by column
name*; the rejected rows form a review queue for people to label; outputs are
written atomically, so that a file appears whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import tabular
from ..data.tabular import CANDIDATES
from ..utils.atomic_files import write_atomically
from ..experiment.catalog import DEFAULT_CONFORMAL_ALPHA
from ..errors import DataFileError, InvalidDataError, InvalidParameterError
from ..evaluation import DEFAULT_LAMBDAS, Judge, calibrate_thresholds
from ..experiment import CalibrationSplit, MethodRun, holdout_split
from ..preprocessing import make_features
from ..methods import make_method
from ..methods._base import set_labels
from ..neighbors import use_backend
from ..methods.reasons import REJECTIONS
from ..utils.validation import check_fraction, check_lambdas

TABLE_FORMATS = (".csv", ".parquet")
ROW = "row"
REVIEW_SUFFIX = ".review.parquet"
REVIEW_NEIGHBORS = 3
"""Nearest training rows shown with each scored row (:func:`neighbor_columns`)."""
OUTPUT_COLUMNS = (ROW, CANDIDATES, "label", "accept", "score", "guess", "reason", "set", "set_size", "neighbor_rows",
                  "neighbor_ids", "neighbor_bags", "neighbor_distances")
"""Columns of every scored output, which no feature of a model may be named (per-class and evidence columns aside)."""


def feature_names(ds) -> list[str]:
    """Names of the feature columns of a data set, as scoring tables must name them.

    A loader's ``info["feature_names"]`` when it has them (CSV and Parquet
    sources: their header without ``candidates`` and ``label``); otherwise
    ``x0``, ``x1``, ...
    """
    names = ds.info.get("feature_names")
    if names is None or len(names) != ds.n_features:
        return [f"x{j}" for j in range(ds.n_features)]
    return [str(n) for n in names]


@dataclass(frozen=True, eq=False)
class FittedModel:
    """A partial-label method fitted on all rows of a data set, ready to score new rows.

    Attributes
    ----------
    method : str
        Name of the method in :data:`pll.methods.METHODS`.
    estimator : NeighborMethod
        The fitted method; it holds the transformed training features
        ``X_train_`` (n, d) and bags ``S_train_`` (n, l).
    transformer : sklearn transformer
        The feature pipeline, fitted on the same rows.
    features : str
        Name of the feature pipeline.
    feature_names : tuple of str, length d
        Input columns the model expects, in the order it was trained on.
    classes : ndarray of shape (l,), str
        Class names; predicted labels are these names.
    fingerprint : str
        Fingerprint of the training data set.
    reject_threshold : float or None
        A row is accepted when its score exceeds this (e.g. a threshold
        calibrated in a benchmark); None keeps the method's own decision.
    set_predictor : SetPredictor or None
        Conformal prediction sets of new rows (``set``, ``set_size`` columns);
        None for a model trained without them (or pickled before they existed).
    calibration : dict or None
        How ``reject_threshold`` was chosen on a hold-out
        (:func:`calibrate_threshold`), when it was.
    holdout_metrics : dict or None
        The model's quality on its hold-out (:func:`evaluate_holdout`): reject
        option -> metric -> value, so that a model shows what it is worth
        wherever it goes; None for a model pickled before they were kept.
    training_ids : ndarray of shape (n,) or None
        The training rows' keys (the training table's ``id`` column), which
        name the nearest training rows of scored rows (``neighbor_ids``).
    """

    method: str
    estimator: object
    transformer: object
    features: str
    feature_names: tuple
    classes: np.ndarray
    fingerprint: str
    reject_threshold: float | None = None
    set_predictor: SetPredictor | None = None
    calibration: dict | None = None
    holdout_metrics: dict | None = None
    training_ids: np.ndarray | None = None

    @property
    def threshold(self):
        """The threshold ``accept`` is decided by (``score > threshold``), or None if the method has none."""
        value = self.reject_threshold
        if value is None:
            value = getattr(self.estimator, "threshold", None)
        return None if value is None else float(value)

    def predict_frame(self, table, source="input") -> pd.DataFrame:
        """Predictions for the rows of ``table`` (feature columns by name, optional ``candidates``).

        Returns a table of ``len(table)`` rows with ``label`` (a class name),
        ``accept``, ``score``, ``guess``, the method's per-class columns
        (e.g. ``belief_<class>``) and, when the model has a set predictor,
        ``set`` (its labels joined by ``|``) and ``set_size``.
        """
        X, S = match_features(table, self.feature_names, self.classes, source)
        return self.predict(X, S)

    def predict(self, X, candidates=None) -> pd.DataFrame:
        """Predictions for raw feature rows ``X`` (n, d) with optional candidate sets (n, l).

        With a reject threshold of its own the model's reasons follow that
        decision (:meth:`RejectPrediction.with_accept
        <pll.methods.RejectPrediction.with_accept>`).  A method that searches
        neighbors does so once; the nearest :data:`REVIEW_NEIGHBORS` give the
        columns of :func:`neighbor_columns`.
        """
        Xt = np.asarray(self.transformer.transform(X), dtype=np.float64)
        neighbors = self._neighbors(Xt)
        result = self.estimator.predict_with_reject(Xt, neighbors=neighbors, candidates=candidates)
        if self.reject_threshold is not None:
            result = result.with_accept(result.score > self.reject_threshold)
        frame = result.to_frame(self.classes).drop(columns=[ROW, "y_true"])
        frame["label"] = self.classes[result.labels]
        if neighbors is not None:
            frame = frame.assign(**neighbor_columns(neighbors, self.estimator.S_train_, self.classes,
                                                    ids=self.training_ids))
        if self.set_predictor is not None:
            sets = self.set_predictor.predict_sets(X, candidates)
            frame["set"], frame["set_size"] = set_labels(sets, self.classes), sets.sum(axis=1)
        return frame

    def _neighbors(self, Xt):
        """The query rows' neighbors among the training rows, as the method would search them; None if it uses none."""
        if getattr(self.estimator, "_n_neighbors_needed", lambda: 0)() == 0:
            return None
        return self.estimator._neighbors_for(Xt, None)


def neighbor_columns(neighbors, S_train, classes, n=None, ids=None) -> dict:
    """What a reviewer compares a row with: its nearest training rows, their bags and distances.

    Columns of lists, nearest first, ``n`` (default :data:`REVIEW_NEIGHBORS`)
    per row: ``neighbor_rows``, the training rows' positions in the training
    data (0-based, in file order after any protocol's row filter, as
    ``pll audit`` names them); ``neighbor_ids``, their keys, when the training
    table had an ``id`` column (``ids``); ``neighbor_bags``, their candidate
    labels joined by ``|``; ``neighbor_distances``, in the model's features.
    """
    n = REVIEW_NEIGHBORS if n is None else n
    rows = np.asarray(neighbors.indices[:, :n], dtype=np.int64)
    shown, where = np.unique(rows, return_inverse=True)  # name each bag shown once, not every training bag
    bags = set_labels(S_train[shown], classes)[where.reshape(rows.shape)]
    out = {"neighbor_rows": list(rows)}
    if ids is not None:
        out["neighbor_ids"] = [list(row) for row in np.asarray(ids, dtype=object)[rows]]
    out["neighbor_bags"] = [list(row) for row in bags]
    out["neighbor_distances"] = list(np.asarray(neighbors.distances[:, :n], dtype=np.float64))
    return out


@dataclass(frozen=True, eq=False)
class SetPredictor:
    """Conformal prediction sets for new rows (:mod:`pll.reject.conformal`), shipped with a :class:`FittedModel`.

    The coverage guarantee needs a scorer that never saw its calibration
    rows, so this is a second feature pipeline and method, fitted on part of
    the training rows (``n_fit``), calibrated on the others (``n_calibration``);
    the main model, fitted on every row, still gives labels and accept flags.

    Attributes
    ----------
    transformer : sklearn transformer
    sets : ConformalSets
        The calibrated sets over the second method.
    n_fit, n_calibration : int
    """

    transformer: object
    sets: object
    n_fit: int
    n_calibration: int

    def predict_sets(self, X, candidates=None):
        """The prediction set of every raw feature row, bool (n, l), within its candidates."""
        Xt = np.asarray(self.transformer.transform(X), dtype=np.float64)
        return self.sets.predict_sets(Xt, candidates=candidates)


@dataclass(frozen=True, eq=False)
class Holdout:
    """A model's hold-out: its feature pipeline and method fitted on a seeded part of the rows, and the other rows.

    What a model trained on every row cannot give: a scorer that never saw
    some rows, to calibrate prediction sets and reject thresholds on them.
    It is the run protocol's hold-out over a whole data set
    (:func:`pll.experiment.holdout_split`, fitted by
    :meth:`pll.experiment.CalibrationSplit.fit_holdout`): the held-out rows
    are its validation rows.

    Attributes
    ----------
    split : CalibrationSplit
        The features fitted on the fitting rows; the held-out rows, transformed.
    estimator : NeighborMethod
        The method fitted on the fitting rows, without a ``no_support`` test.
    """

    split: CalibrationSplit
    estimator: object

    @property
    def transformer(self):
        """The feature pipeline, fitted on the fitting rows."""
        return self.split.transformer

    @property
    def rows(self) -> np.ndarray:
        """The held-out rows of the data set, sorted."""
        return self.split.val_rows

    @property
    def X(self) -> np.ndarray:
        """The held-out rows' features, transformed as new rows."""
        return self.split.X_val

    @property
    def n_fit(self) -> int:
        """How many rows the features and the method were fitted on."""
        return int(self.split.fit_rows.size)

    def predict(self):
        """The held-out rows as the hold-out model predicts them, with its own reject option."""
        return self.split.predict_validation(self.estimator)


def fit_holdout(ds, method, params=None, features="minmax", random_state=None, knn="auto", knn_options=None,
                fraction=0.2) -> Holdout:
    """Fit ``features`` and ``method`` on a seeded ``1 − fraction`` of the rows of ``ds``; hold out the rest.

    The rows are drawn and the features fitted by
    :func:`pll.experiment.holdout_split`; the method is fitted as a run fits
    its hold-out model (:meth:`pll.experiment.CalibrationSplit.fit_holdout`),
    its neighbor searches pointed at ``knn`` unless ``params`` set them.  The
    hold-out model calibrates (thresholds, conformal sets); it has no
    ``no_support`` test (:func:`pll.methods.without_support_test`), which would cost a search of its rows.
    """
    split = holdout_split(ds, features, 0, knn, knn_options, fraction, random_state)
    run = MethodRun(method, method, params, features)
    return Holdout(split, split.fit_holdout(run, random_state, knn, knn_options))


def fit_set_predictor(ds, holdout: Holdout, alpha=DEFAULT_CONFORMAL_ALPHA) -> SetPredictor:
    """Prediction sets of the ``holdout`` model, calibrated on its held-out rows' bags."""
    from ..reject.conformal import ConformalSets

    sets = ConformalSets(holdout.estimator, alpha=alpha).fit(holdout.X, ds.S[holdout.rows], neighbors=holdout.split.val)
    return SetPredictor(holdout.transformer, sets, holdout.n_fit, int(holdout.rows.size))


def calibrate_threshold(ds, holdout: Holdout, lam) -> dict:
    """The reject threshold minimising ``R_λ`` on the held-out rows, for a model fitted on every row.

    With true labels, :func:`pll.evaluation.calibrate_thresholds`; without,
    from the bags alone: the upper bound of ``R_λ`` is minimised
    (:func:`pll.evaluation.bag_bounds.calibrate_thresholds_from_bags`).  Returns
    ``threshold``, ``risk`` (held-out, the upper bound without labels),
    ``rejection_rate`` and, without labels, ``risk_lower`` and ``rejects_all``.
    """
    from ..evaluation.bag_bounds import calibrate_thresholds_from_bags

    pred = holdout.predict()
    if ds.y is not None:
        table = calibrate_thresholds(pred.score, pred.labels == ds.y[holdout.rows], (lam,))
    else:
        table = calibrate_thresholds_from_bags(pred.score, pred.labels, ds.S[holdout.rows], (lam,))
    return {name: (bool(v) if name == "rejects_all" else float(v)) for name, v in table.iloc[0].items()
            if name != "lambda"}


def evaluate_holdout(ds, holdout: Holdout, threshold=None, set_predictor: SetPredictor | None = None,
                     lambdas=DEFAULT_LAMBDAS) -> dict:
    """The reject report of the ``holdout`` model on its held-out rows, for each reject option the model has.

    A model fitted on every row has no unseen rows to be judged on; its
    hold-out twin (same features, method and parameters, fitted on the other
    rows) stands in for it.  Rows are judged as the pipeline's evaluation
    judges test rows: against true labels when ``ds`` has them
    (:func:`pll.evaluation.reject_report`), else by the partial-label loss
    against their bags, rows with empty bags left out
    (:func:`pll.evaluation.partial_label_report`).

    Parameters
    ----------
    ds : PartialLabelDataset
        The data set ``holdout`` was fitted on.
    holdout : Holdout
    threshold : float or None
        The model's reject threshold (``accept = score > threshold``); None
        keeps the method's own decision.  Either way this is what
        ``pll score`` would do: option ``native``.  A threshold chosen on
        this hold-out (``reject_lambda``) makes its risks in-sample.
    set_predictor : SetPredictor or None
        The model's conformal sets, calibrated on the hold-out's rows: option
        ``conformal`` (accept iff the set is one label) adds
        :func:`pll.reject.conformal.set_report`.  Their ``coverage`` (true labels
        only) is measured on their own calibration rows, so it is in-sample,
        no test of their guarantee; set sizes and the reject report are
        in-sample too.
    lambdas : sequence of float
        Rejection costs of the ``risk_<λ>`` metrics.

    Returns
    -------
    dict
        Reject option -> metric -> value, as
        :func:`pll.experiment.run_metrics` names for a run; empty
        when no held-out row can be judged (no true labels and only empty bags).
    """
    try:
        judge = Judge(ds, holdout.rows, "held-out")
    except InvalidDataError:
        return {}
    pred = holdout.predict()
    if threshold is not None:
        pred = replace(pred, accept=pred.score > threshold)
    options = {"native": judge.report(pred, lambdas)}
    if set_predictor is not None:
        sets = set_predictor.sets.predict_with_reject(holdout.X, neighbors=holdout.split.val)
        options["conformal"] = {**judge.report(sets, lambdas), **judge.sets(sets)}
    return options


def fit_model(ds, method, params=None, features="minmax", random_state=None, threshold=None, knn="auto",
              knn_options=None, conformal_alpha=DEFAULT_CONFORMAL_ALPHA, reject_lambda=None) -> FittedModel:
    """Fit the feature pipeline and ``method`` (with ``params``) on every row of ``ds``.

    ``threshold``, when given, replaces the method's own reject decision by
    ``score > threshold``; ``reject_lambda`` instead chooses it on a
    hold-out, to minimise ``R_λ`` (:func:`calibrate_threshold`: true labels if
    the data has them, else the bags' upper bound).  Neighbor searches of the
    features and of the method (now and when scoring) use the backend ``knn``
    with ``knn_options``, unless ``params`` set the method's own.
    ``conformal_alpha`` (None: none) adds prediction sets that hold the true
    label with probability ≥ 1 − α (:func:`fit_set_predictor`; the bags must
    hold their true labels).  Both are calibrated on the same hold-out, 20 %
    of the rows, whose model is fitted on the other 80 %.

    Examples
    --------
    >>> import pandas as pd, pll
    >>> ds = pll.noise.apply_noise(pll.load_dataset("iris"), "auto", random_state=0)
    >>> model = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=0)
    >>> model.feature_names
    ('x0', 'x1', 'x2', 'x3')
    >>> new = pd.DataFrame({"x3": [0.2, 1.5], "x2": [1.4, 4.5], "x1": [3.5, 2.9], "x0": [5.1, 6.0],
    ...                     "candidates": [None, "virginica|versicolor"]})
    >>> model.predict_frame(new)["label"].tolist()
    ['setosa', 'versicolor']
    """
    check_reject_options(threshold, reject_lambda, conformal_alpha)
    names = tuple(feature_names(ds))
    check_no_clash(names, OUTPUT_COLUMNS, ds.name)
    transformer = use_backend(make_features(features), knn, knn_options)
    X = np.asarray(transformer.fit_transform(ds.X), dtype=np.float64)
    estimator = use_backend(make_method(method, params, random_state=random_state), knn, knn_options, keep=params or {})
    estimator.fit(X, ds.S)
    classes = np.asarray(ds.classes).astype(str)
    holdout = fit_holdout(ds, method, params, features, random_state, knn, knn_options)
    set_predictor = None if conformal_alpha is None else fit_set_predictor(ds, holdout, conformal_alpha)
    calibration = None if reject_lambda is None else calibrate_threshold(ds, holdout, reject_lambda)
    if calibration is not None:
        threshold = calibration["threshold"]
    threshold = None if threshold is None else float(threshold)
    return FittedModel(method, estimator, transformer, features, names, classes, ds.fingerprint(), threshold,
                       set_predictor, calibration, evaluate_holdout(ds, holdout, threshold, set_predictor), ds.ids)


def check_reject_options(threshold=None, reject_lambda=None, conformal_alpha=None):
    """Refuse a training's reject options that cannot work (see :func:`fit_model`), before anything is fitted."""
    if threshold is not None and not (isinstance(threshold, float | int) and np.isfinite(threshold)):
        raise InvalidParameterError(f"threshold must be a finite number, got {threshold!r}")
    if threshold is not None and reject_lambda is not None:
        raise InvalidParameterError("give a threshold or a reject_lambda to choose one, not both")
    if reject_lambda is not None:
        check_lambdas((reject_lambda,))
    check_fraction(conformal_alpha, "conformal_alpha", allow_none=True)


def check_no_clash(input_columns, output_columns, source):
    """Input columns are copied into scored outputs, so none may share a name with an output column."""
    clash = sorted(set(map(str, input_columns)) & set(map(str, output_columns)))
    if clash:
        raise InvalidDataError(
            f"{source}: feature column(s) {', '.join(clash)} have the name of an output column; rename them"
        )


def read_table(path) -> pd.DataFrame:
    """Read a CSV or Parquet scoring table with the data loaders' reader (no validation of its columns yet)."""
    return tabular.read_table(check_input_path(path))


def check_input_table(path) -> None:
    """Read a scoring input and refuse what can be told without the model: a file that cannot be read as a
    table, a ``candidates`` cell that cannot be read as a bag.  Its columns are matched to the model's once
    the model is loaded (:func:`match_features`)."""
    table = read_table(path)
    if CANDIDATES in table.columns:
        tabular.check_candidates(Path(path), table[CANDIDATES])


def check_input_path(path) -> Path:
    """``path`` as a Path if it can be a scoring input; else a :class:`DataFileError` naming it and why.

    Cheap (no file is read), so that a command can refuse a wrong path before
    it starts a server or loads a model.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_FORMATS:
        raise DataFileError(f"{path}: unsupported file type {suffix or '(none)'}; use {', '.join(TABLE_FORMATS)}")
    if not path.exists():
        raise DataFileError(f"{path}: no such file")
    if not path.is_file():
        raise DataFileError(f"{path}: not a file")
    if not os.access(path, os.R_OK):
        raise DataFileError(f"{path}: not readable")
    if path.stat().st_size == 0:
        raise DataFileError(f"{path}: the file is empty")
    return path


def check_output_path(path) -> Path:
    """``path`` as a Path if a scored output (and its review queue) can be written there.

    Else an :class:`InvalidParameterError` naming the path and why: not
    ``.parquet``, a folder that does not exist (none is created, as ``open``
    creates none) or cannot be written, a folder where a file should go.
    Cheap, like :func:`check_input_path`.
    """
    path = Path(path)
    if path.suffix.lower() != ".parquet":
        raise InvalidParameterError(f"{path}: the output must be a .parquet file")
    folder = path.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise InvalidParameterError(f"{path}: cannot write there, the folder {folder} {why}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{path}: cannot write there, the folder {folder} is not writable")
    for target in (path, review_path(path)):
        if target.is_dir():
            raise InvalidParameterError(f"{target}: is a folder, cannot write a file there")
    return path


def match_features(table, names, classes, source="input"):
    """Feature matrix and candidate sets of ``table``, its columns matched to ``names`` by name.

    Values are checked as the data loaders check a training table
    (:func:`pll.data.tabular.table_arrays`, with the model's classes).

    Parameters
    ----------
    table : DataFrame
        One column per name in ``names`` (any order) and optionally ``candidates``.
    names : sequence of str, length d
    classes : ndarray of shape (l,), str
    source : str
        Named in error messages (a file name).

    Returns
    -------
    X : ndarray of shape (n, d), float64
    S : bool ndarray of shape (n, l), or None when the table has no candidates
        column.  An empty bag means every class is a candidate.
    """
    columns = [str(c) for c in table.columns]
    missing = [n for n in names if n not in columns]
    unexpected = [c for c in columns if c not in names and c not in (CANDIDATES, tabular.ID)]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing feature column(s) {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected column(s) {', '.join(unexpected)}")
        raise InvalidDataError(
            f"{source}: columns do not match the model's {len(names)} features: {'; '.join(parts)}"
        )
    if len(set(columns)) != len(columns):
        raise InvalidDataError(f"{source}: duplicate column names")
    if len(table) == 0:
        raise InvalidDataError(f"{source}: the table has no rows")
    table = table.set_axis(columns, axis=1)
    ordered = table[list(names)].assign(**{CANDIDATES: table[CANDIDATES] if CANDIDATES in columns else None})
    X, S, _, _, _, _ = tabular.table_arrays(source, ordered, classes)
    return X, (S if CANDIDATES in columns else None)


def scored_table(table, predictions) -> pd.DataFrame:
    """Every input row: its position ``row``, the predictions, then the input columns."""
    check_no_clash(table.columns, predictions.columns, "input")
    out = pd.concat(
        [pd.DataFrame({ROW: np.arange(len(table), dtype=np.int64)}), predictions.reset_index(drop=True),
         table.reset_index(drop=True)],
        axis=1,
    )
    return out


def review_queue(scored) -> pd.DataFrame:
    """The rejected rows, least certain first (score ascending, ties by row)."""
    rejected = scored.loc[~scored["accept"].to_numpy(dtype=bool)]
    return rejected.sort_values(["score", ROW], kind="mergesort").reset_index(drop=True)


def review_path(output) -> Path:
    """Where the review queue of ``output`` goes: ``<output stem>.review.parquet`` beside it."""
    output = Path(output)
    return output.with_name(output.stem + REVIEW_SUFFIX)


def summarize(scored) -> dict:
    """Counts of scored, accepted and rejected rows and the score distribution's centre."""
    accept = scored["accept"].to_numpy(dtype=bool)
    score = scored["score"].to_numpy(dtype=np.float64)
    n = int(accept.size)
    return {
        "rows": n,
        "accepted": int(accept.sum()),
        "rejected": int(n - accept.sum()),
        "rejection_rate": float(1.0 - accept.mean()) if n else 0.0,
        "score_mean": float(score.mean()) if n else 0.0,
        "score_median": float(np.median(score)) if n else 0.0,
        **reason_counts(scored),
    }


def reason_counts(scored) -> dict:
    """``rejected_<code>``: the rejected rows of each reason (:mod:`pll.methods.reasons`); empty without a ``reason`` column."""
    if "reason" not in scored:
        return {}
    reason = scored["reason"].to_numpy()
    return {f"rejected_{code}": int((reason == code).sum()) for code in REJECTIONS}


def score_file(model, input_path, output_path):
    """Score the table at ``input_path``; write ``output_path`` and its review queue atomically.

    Both files are first written in full beside their targets and only then
    renamed into place, so a failure (bad input included) leaves no output.

    Returns
    -------
    summary : dict
        :func:`summarize` of the scored rows plus the ``output`` and ``review`` paths.
    scored : DataFrame
        What was written to ``output_path``.
    """
    output_path = check_output_path(output_path)
    table = read_table(input_path)
    scored = scored_table(table, model.predict_frame(table, source=str(input_path)))
    queue = review_path(output_path)
    write_atomically({output_path: _parquet(scored), queue: _parquet(review_queue(scored))})
    return {**summarize(scored), "output": str(output_path), "review": str(queue)}, scored


def _parquet(frame):
    return lambda path: frame.to_parquet(path, index=False)


def file_fingerprint(path) -> str:
    """A short hash of a file's bytes: what a scoring run records, and how the ledger knows a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def score_figure(score, accept, threshold=None, title="Score distribution"):
    """A histogram of scores, accepted and rejected rows stacked, with the threshold marked.

    Built on :class:`matplotlib.figure.Figure` directly, so no GUI backend is involved.
    """
    from matplotlib.figure import Figure

    score = np.asarray(score, dtype=np.float64)
    accept = np.asarray(accept, dtype=bool)
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    lo, hi = (float(score.min()), float(score.max())) if score.size else (0.0, 1.0)
    bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 31)
    ax.hist([score[accept], score[~accept]], bins=bins, stacked=True,
            label=[f"accepted ({int(accept.sum())})", f"rejected ({int((~accept).sum())})"],
            color=["tab:green", "tab:red"])
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle="--", label=f"threshold {threshold:g}")
    ax.set_xlabel("score")
    ax.set_ylabel("rows")
    ax.set_title(title)
    ax.legend()
    return fig


# A folder of incoming files: which are new, and what became of each.

LEDGER = ".pll-scoring-ledger.json"
SCORED_SUFFIX = ".scored.parquet"


def folder_output(output_dir, input_path) -> Path:
    """The scored output of ``input_path`` in ``output_dir``: ``<input name>.scored.parquet``."""
    return Path(output_dir) / f"{Path(input_path).name}{SCORED_SUFFIX}"


def read_ledger(output_dir) -> dict:
    """The ledger of ``output_dir``: input file name -> its last outcome (empty when there is none)."""
    path = Path(output_dir) / LEDGER
    if not path.exists():
        return {}
    try:
        files = json.loads(path.read_text())["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataFileError(f"{path}: not a scoring ledger ({exc}); move it away to start afresh") from None
    return files


def write_ledger(output_dir, ledger):
    """Replace the ledger of ``output_dir`` atomically."""
    text = json.dumps({"files": ledger}, indent=2, sort_keys=True)
    write_atomically({Path(output_dir) / LEDGER: lambda tmp: Path(tmp).write_text(text)})


def pending_files(input_dir, output_dir, ledger) -> list[Path]:
    """The CSV/Parquet files of ``input_dir`` not yet scored, by name.

    A file counts as scored when the ledger records a success for its name
    and the same content fingerprint (a file replaced by new content is new).
    Hidden files (``.name``) are skipped: that is how writers stage files.
    """
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if not input_dir.is_dir():
        raise DataFileError(f"{input_dir}: no such folder")
    if input_dir.resolve() == output_dir.resolve():
        raise InvalidParameterError(f"{input_dir}: the output folder must differ from the input folder")
    files = sorted(
        p for p in input_dir.iterdir()
        if p.is_file() and p.suffix.lower() in TABLE_FORMATS and not p.name.startswith(".")
    )
    return [p for p in files if not _scored(ledger.get(p.name), p)]


def _scored(entry, path):
    return bool(entry) and entry.get("status") == "scored" and entry.get("fingerprint") == file_fingerprint(path)
