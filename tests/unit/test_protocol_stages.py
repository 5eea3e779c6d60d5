"""The run protocol's declaration: every stage reads what an earlier one wrote, and each model is fitted once per role."""

from collections import Counter

import pytest

import pll
from pll.experiment import CalibrationSplit, declare_protocol, plan_run, run_protocol

METHODS = ["pl_knn", "dst_pll", "pl_aknn"]


@pytest.mark.parametrize("alpha", [0.1, None])
def test_every_stage_reads_values_written_before_it(alpha):
    plan = plan_run(METHODS, {"pl_knn": [{"n_neighbors": 5}, {"n_neighbors": 10}]})
    protocol = declare_protocol(plan, seed=0, conformal_alpha=alpha)
    written = {"raw"}
    for stage in protocol.stages:
        assert set(stage.reads) <= written, stage.label
        assert stage.writes not in written, f"{stage.writes} written twice"
        written.add(stage.writes)
    assert protocol.stages[-1].writes == "result"
    readers = protocol.readers()
    assert all(readers[name] for name in written - {"result"}), "a value nothing reads"
    kinds = Counter(stage.kind for stage in protocol.stages)
    runs = len(plan.runs)
    assert kinds["holdout"] == kinds["validation"] == kinds["method"] == kinds["trust"] == runs
    assert kinds["conformal"] == (runs if alpha is not None else 0)
    assert kinds["features"] == kinds["neighbors"] == kinds["calibration"] == len(plan.groups)


def test_the_hold_out_model_is_fitted_once_per_method_run_and_shared(monkeypatch):
    """The method's own calibration and its conformal sets read one hold-out fit (they fitted one each before)."""
    fits = Counter()
    fit_holdout = CalibrationSplit.fit_holdout

    def counted(self, run, seed):
        fits[run.name] += 1
        return fit_holdout(self, run, seed)

    monkeypatch.setattr(CalibrationSplit, "fit_holdout", counted)
    result = run_protocol(pll.load_dataset("iris"), seed=0, methods=METHODS)
    assert fits == {name: 1 for name in METHODS}
    assert Counter(o.option for o in result.outputs) == {"native": 3, "trust": 3, "conformal": 3}


@pytest.mark.parametrize("alpha", [0.1, None])
def test_a_hold_out_model_is_read_only_by_its_calibrations_not_by_the_stages_that_wait_for_the_search(alpha):
    """At 1M rows a hold-out model holds hundreds of MB: kept until the method stage (which waits for the
    neighbor search), it stood beside the search's graph at the run's memory peak."""
    protocol = declare_protocol(plan_run(METHODS), seed=0, conformal_alpha=alpha)
    for stage in protocol.stages:
        if stage.kind == "holdout":
            run = stage.writes.partition(":")[2]
            readers = {s.writes for s in protocol.stages if stage.writes in s.reads}
            assert readers == {f"validation:{run}"} | ({f"conformal:{run}"} if alpha is not None else set())
