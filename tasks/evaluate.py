"""Evaluation stage: reject reports of every method and reject option."""

from prefect import task
from prefect.cache_policies import NO_CACHE

from pll.evaluation import reject_report


@task(name="evaluate", cache_policy=NO_CACHE)
def evaluate(outputs, ds, rows) -> dict:
    """Metrics named ``<method>.<reject option>.<metric>`` for every method output."""
    metrics = {}
    for out in outputs:
        report = reject_report(ds.y[rows.test], out.test.labels, out.test.accept)
        for key, value in report.items():
            metrics[f"{out.method}.{out.option}.{key}"] = value
    return metrics
