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


@pytest.mark.parametrize("features", ["minmax", "pca"])
def test_a_served_model_holds_out_the_rows_a_run_holds_out_and_fits_them_alike(features):
    """``pll train``'s hold-out is the run protocol's: on a run's training rows, the same seed holds out the
    same rows, fits the same features on the others and the same hold-out model."""
    import numpy as np

    from pll.experiment import calibration_split, holdout_split, make_split
    from pll.serving import fit_holdout

    ds = pll.noise.apply_noise(pll.load_dataset("wine"), "uniform", {"p": 0.5, "r": 1}, random_state=0)
    seed, params = 3, {"n_neighbors": 5}
    rows = make_split(ds.n_rows, seed)
    run = calibration_split(ds, rows, features, 5, "exact")  # what a run's calibration stage computes
    served = fit_holdout(ds.subset(rows.train), "pl_knn", params, features, random_state=seed, knn="exact")
    np.testing.assert_array_equal(served.rows, rows.val)  # positions within the training rows
    np.testing.assert_array_equal(served.split.fit_rows, rows.fit)
    np.testing.assert_array_equal(served.split.split.X_train, run.split.X_train)
    np.testing.assert_array_equal(served.X, run.X_val)
    np.testing.assert_array_equal(served.transformer.transform(ds.X[rows.test]), run.X_test)
    # The hold-out model: searching its own neighbors, as a served one does, or handed them, as in a run.
    plan = plan_run(["pl_knn"], {"pl_knn": params}, features)
    ours, theirs = served.predict(), run.predict_validation(run.fit_holdout(plan.runs[0], seed))
    np.testing.assert_array_equal(ours.labels, theirs.labels)
    np.testing.assert_array_equal(ours.score, theirs.score)
    # Its neighbors, where asked for: those of the run's hold-out split.
    searched = holdout_split(ds.subset(rows.train), features, 5, "exact", random_state=seed)
    assert searched.test is None
    np.testing.assert_array_equal(searched.val.indices, run.val.indices)
