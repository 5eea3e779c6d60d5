"""The DST-PLL paper's experimental choices as named presets: as its text states them, and as its authors' code makes them.

Reproducing the paper's tables (issue #20) showed that the text and the
released code (``script_create_data.py``, ``partial_label_learning/data.py``,
``script_create_plots.py``) differ in every choice that moves the numbers:

===========================  ==============================  ===============================================
choice                       ``paper_text`` (§5.2, Table 1–2)  ``authors_code``
===========================  ==============================  ===============================================
uniform noise                3 wrong labels on 70 % of rows   2 wrong labels on 50 % of rows
class-dependent noise        "adds the partner label"         partner drawn with weight ε = 0.7
                             (ε = 1) on 70 % of rows          on 70 % of rows
instance-dependent noise     "a supervised classifier"        d-300-300-300-l network, SGD on a squared
                             (here: an MLP trained by Adam)   loss, 10 epochs (:mod:`pll.noise._network`)
``R_λ`` in tables            eq. (1) per run, then the mean   (1 − mean accuracy of accepted rows) +
                                                              λ · mean rejection rate, at the operating point
                                                              of :func:`script_operating_point`
t-test of tables             paired (by data set and seed)    unpaired (``scipy.stats.ttest_ind``)
===========================  ==============================  ===============================================

A preset fills in the noise parameters a run or grid does not give itself
(:func:`preset_noise_params`) and names how the report aggregates risks and
tests differences (:mod:`pll.reporting.reproduction`).  PL A-kNN's density step (k = 50
in its authors' code, 100 in its text) is a parameter of its feature pipeline,
whose default is the code's; the text's is the spec
``pl_aknn_real(density_k=100)`` (:func:`pll.preprocessing.parse_feature_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import pandas as pd
from scipy import stats

from .catalog import RISK_AGGREGATIONS, TTESTS
from ..errors import InvalidParameterError
from ..evaluation import paired_p_values
from ..evaluation.metric_names import risk_name

@dataclass(frozen=True)
class Preset:
    """One reading of the paper's protocol: noise parameters per model, the tables' risk aggregation and t-test.

    Their one-line descriptions are :data:`pll.experiment.catalog.PRESETS`.
    """

    name: str
    noise: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    risk_aggregation: str = "eq1"
    ttest: str = "paired"


PRESETS = {
    preset.name: preset
    for preset in (
        Preset("paper_text", MappingProxyType({
            "uniform": {"p": 0.7, "r": 3},
            "class_dependent": {"p": 0.7, "eps": 1.0, "r": 1},  # "adds the partner label"
            "instance_dependent": {"classifier": "mlp"},  # "trains a supervised classifier"
        }), "eq1", "paired"),
        Preset("authors_code", MappingProxyType({
            "uniform": {"p": 0.5, "r": 2},  # script_create_data.py
            "class_dependent": {"p": 0.7, "eps": 0.7, "r": 1},
            "instance_dependent": {"classifier": "authors_sgd"},  # Datasplit.augment_targets_instance_dependent
        }), "authors_script", "unpaired"),  # script_create_plots.py
    )
}


def get_preset(name) -> Preset:
    """The preset called ``name``; a clear error for any other name."""
    if name not in PRESETS:
        raise InvalidParameterError(f"unknown preset {name!r}: choose from {', '.join(PRESETS)}")
    return PRESETS[name]


def preset_noise_params(preset, model, params=None) -> dict:
    """The noise parameters of ``model`` under ``preset`` (a name or None), with ``params`` taking precedence.

    Models the preset does not fix (and ``auto``, ``none``) keep ``params``.

    Examples
    --------
    >>> preset_noise_params("authors_code", "uniform", {"p": 0.3})
    {'p': 0.3, 'r': 2}
    >>> preset_noise_params(None, "uniform", {"p": 0.3})
    {'p': 0.3}
    """
    params = dict(params or {})
    if preset is None:
        return params
    return {**get_preset(preset).noise.get(model, {}), **params}


def check_choice(kind, value, choices):
    if value not in choices:
        raise InvalidParameterError(f"unknown {kind} {value!r}: choose from {', '.join(choices)}")
    return value


# --- the authors' plotting script: its operating point per method -------------------------------------------


@dataclass(frozen=True)
class ScriptRule:
    """How the authors' script turns a method's score into its accepted rows.

    It sweeps thresholds ``t = start, start + 0.01, …, 1`` and accepts rows
    with ``score > t`` (``strict``) or ``score >= t``; thresholds leaving 10
    or fewer accepted rows are skipped; the operating point is the remaining
    threshold nearest ``target`` (the method's reject rule: Δ > 0 for
    DST-PLL, half the votes for PL-kNN, 90 % confidence for the others).
    ``top_share`` says the score is the largest normalised class share (the
    script's ``maxprob``) rather than the method's own reject score.
    """

    strict: bool
    start: float
    target: float
    top_share: bool = False


SCRIPT_RULES = MappingProxyType({
    "dst_pll": ScriptRule(strict=True, start=-1.0, target=0.0),
    "pl_knn": ScriptRule(strict=False, start=0.0, target=0.5),
    "ipal": ScriptRule(strict=False, start=0.0, target=0.9, top_share=True),
    "pl_classifier": ScriptRule(strict=False, start=0.0, target=0.9),
    "proden": ScriptRule(strict=False, start=0.0, target=0.9),
    "crosel": ScriptRule(strict=False, start=0.0, target=0.9),
    "vi_pll": ScriptRule(strict=False, start=0.0, target=0.9),
    "soft_voting": ScriptRule(strict=False, start=0.0, target=0.9),
    "pl_aknn": ScriptRule(strict=True, start=-1.0, target=0.0),
})
"""Every method with the rule the DST-PLL authors' script applies to it: the paper's methods as the script has
them; PL A-kNN (not in that paper) as DST-PLL, since its own rule is also ``score > 0``.  Every method has one,
so that every method run logs the same metrics."""
SCRIPT_MIN_ACCEPTED = 10
"""The script skips a threshold that accepts this many test rows or fewer."""


def script_score(prediction, rule: ScriptRule) -> np.ndarray:
    """The score the script thresholds: the prediction's reject score, or its largest share (``top_share``)."""
    if rule.top_share:
        if prediction.shares is None:
            raise InvalidParameterError("this rule thresholds the largest class share, and the prediction has none")
        return np.asarray(prediction.shares, dtype=np.float64).max(axis=1)
    return np.asarray(prediction.score, dtype=np.float64)


def script_operating_point(score, correct, rule: ScriptRule) -> dict:
    """The authors' script's operating point on one run's test rows.

    Returns ``script_threshold``, ``script_rejection_rate`` and
    ``script_covered_accuracy`` (accuracy of the accepted rows); all NaN when
    every threshold leaves 10 or fewer rows accepted (the script would fail).

    Examples
    --------
    >>> rule = ScriptRule(strict=False, start=0.0, target=0.5)
    >>> score = np.r_[np.full(12, 0.8), np.full(8, 0.2)]
    >>> correct = np.r_[np.ones(11, bool), np.zeros(9, bool)]
    >>> script_operating_point(score, correct, rule)
    {'script_threshold': 0.5, 'script_rejection_rate': 0.4, 'script_covered_accuracy': 0.9166666666666666}
    """
    score = np.asarray(score, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    n = score.size
    order = np.argsort(score, kind="stable")
    sorted_score = score[order]
    right_above = np.r_[np.cumsum(correct[order][::-1])[::-1], 0]  # correct rows from position i on
    thresholds = np.arange(rule.start, 1.01, 0.01)  # the script's grid, float steps included
    first = np.searchsorted(sorted_score, thresholds, side="right" if rule.strict else "left")
    accepted = n - first
    keep = accepted > SCRIPT_MIN_ACCEPTED
    if not keep.any():
        return {"script_threshold": np.nan, "script_rejection_rate": np.nan, "script_covered_accuracy": np.nan}
    best = np.flatnonzero(keep)[np.argmin(np.abs(thresholds[keep] - rule.target))]
    return {
        "script_threshold": float(thresholds[best]),
        "script_rejection_rate": float(first[best] / n),
        "script_covered_accuracy": float(right_above[first[best]] / accepted[best]),
    }


# --- the tables' aggregation ---------------------------------------------------------------------------------


def aggregate_risk(runs: pd.DataFrame, lam: float, how: str) -> tuple[float, float]:
    """Mean and std of ``R_λ`` over the runs of one method (one row each), aggregated as ``how`` says.

    ``eq1``: the column ``risk_<λ>`` (eq. (1) per run), its mean and sample
    std.  ``authors_script``: the script's ``(1 − mean(acc)) + λ · mean(frac)``
    from the columns ``script_covered_accuracy`` and
    ``script_rejection_rate``, with its std ``sqrt(std(acc)² + λ · std(frac)²)``
    (λ, not λ², as the script has it).  Runs without an operating point
    (NaN) are left out.
    """
    check_choice("risk aggregation", how, RISK_AGGREGATIONS)
    if how == "eq1":
        values = runs[risk_name(lam)].dropna()
        return float(values.mean()), float(values.std(ddof=1))
    frame = runs[["script_covered_accuracy", "script_rejection_rate"]].dropna()
    acc, frac = frame["script_covered_accuracy"], frame["script_rejection_rate"]
    mean = (1.0 - acc.mean()) + lam * frac.mean()
    return float(mean), float(np.sqrt(acc.std(ddof=1) ** 2 + lam * frac.std(ddof=1) ** 2))


def two_sided_p(a: pd.Series, b: pd.Series, kind: str) -> float:
    """p-value of the difference between two methods' results: ``paired`` on their shared index, or ``unpaired``.

    ``a`` and ``b`` are indexed by the observation (e.g. data set and seed).
    Paired: :func:`pll.evaluation.paired_p_values`, the test the comparison
    tables use (identical results give 1.0, fewer than
    :data:`pll.evaluation.MIN_PAIRS` pairs NaN).  Unpaired: identical results
    give 1.0, fewer than two values on either side NaN.
    """
    check_choice("t-test", kind, TTESTS)
    if kind == "paired":
        shared = a.index.intersection(b.index)
        diff = a.loc[shared].to_numpy(float) - b.loc[shared].to_numpy(float)
        return float(paired_p_values(diff[:, None])[0])
    x, y = a.to_numpy(float), b.to_numpy(float)
    if x.size < 2 or y.size < 2:
        return float("nan")
    if np.array_equal(np.sort(x), np.sort(y)):
        return 1.0
    return float(stats.ttest_ind(x, y).pvalue)
