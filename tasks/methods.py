"""Method stage: fit a method on the training rows and predict the test rows with reject."""

from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.methods import RejectPrediction, make_method


@dataclass(frozen=True)
class MethodOutput:
    """A fitted method's predictions on the test rows and its disambiguation of the training rows."""

    method: str
    test: RejectPrediction
    train: RejectPrediction


@task(name="method", cache_policy=NO_CACHE, task_run_name="method-{name}")
def run_method(name: str, params: dict | None, split, neighbors, seed: int) -> MethodOutput:
    """Fit ``name`` on the split's training rows, reusing the precomputed ``neighbors``."""
    nb_train, nb_test = neighbors
    clf = make_method(name, params, random_state=seed)
    clf.fit(split.X_train, split.train.S, neighbors=nb_train)
    return MethodOutput(
        name,
        clf.predict_with_reject(split.X_test, neighbors=nb_test),
        clf.disambiguate(),
    )


def neighbors_needed(methods: dict) -> int:
    """The largest number of neighbors any of ``methods`` (name -> params) needs."""
    return max(make_method(name, params)._n_neighbors_needed() for name, params in methods.items())
