"""Method stage: fit a method, predict test and validation rows with reject, disambiguate training rows."""

from dataclasses import dataclass

from prefect import task
from sklearn.base import clone

from pll.methods import RejectPrediction, make_method
from tasks.caching import CACHED, RETRIES
from tasks.progress import logged_progress


@dataclass(frozen=True)
class MethodOutput:
    """What one method, with one reject option, produced on one split.

    ``test``: the test rows; ``train``: the disambiguated training rows;
    ``val``: the validation hold-out, predicted by the same method fitted on
    the other training rows (for calibrating thresholds).  ``option`` names
    the reject option whose ``accept`` and ``score`` the test and validation
    predictions carry: ``native`` for the method's own; ``train`` always
    carries the native option's.
    """

    method: str
    features: str
    test: RejectPrediction
    train: RejectPrediction
    val: RejectPrediction
    option: str = "native"


@task(name="method", **CACHED, **RETRIES, task_run_name="method-{name}")
def run_method(name: str, params: dict | None, split, rows, neighbors, seed: int) -> MethodOutput:
    """Fit ``name`` on the split's training rows, reusing the precomputed ``neighbors``."""
    with logged_progress():
        clf = make_method(name, params, random_state=seed)
        clf.fit(split.X_train, split.train.S, neighbors=neighbors.train)
        holdout = clone(clf).fit(split.X_train[rows.fit], split.train.S[rows.fit])
        return MethodOutput(
            name,
            split.features,
            test=clf.predict_with_reject(split.X_test, neighbors=neighbors.test),
            train=clf.disambiguate(),
            val=holdout.predict_with_reject(split.X_train[rows.val], neighbors=neighbors.val),
        )


def neighbors_needed(methods: dict) -> int:
    """The largest number of neighbors any of ``methods`` (name -> params) needs."""
    return max(make_method(name, params)._n_neighbors_needed() for name, params in methods.items())
