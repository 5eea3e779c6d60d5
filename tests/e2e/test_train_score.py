"""Train once, score new data: fitted models in MLflow, the scoring flows and the review queue."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlflow.tracking import MlflowClient

from pll.data import PartialLabelDataset
from pll.reject.conformal import set_report
from pll.evaluation import partial_label_report, reject_report
from pll.experiment import run_metrics
from pll.errors import (
    DataFileError,
    FilesFailedError,
    InvalidDataError,
    InvalidParameterError,
    ModelNotFoundError,
    PllError,
)
from pll.methods import METHODS, make_method
from pll.neighbors import kneighbors
from pll.methods.reasons import REJECTIONS
from pll.serving import (
    LEDGER,
    REVIEW_NEIGHBORS,
    check_input_path,
    check_output_path,
    fit_holdout,
    fit_model,
    fit_set_predictor,
    folder_output,
    match_features,
    read_ledger,
    review_path,
    review_queue,
    score_file,
    scored_table,
)
from pll_pipeline.tracking.models import artifact_location, input_example, load_model, log_model
from pll_pipeline.tracking.runs import end_run, start_run

ROOT = Path(__file__).resolve().parents[2]
CLASSES = np.array(["ant", "bee", "cat", "dog"])


def synthetic(n=90, seed=0, names=("height", "weight", "age")):
    """Four well separated classes in three named features; half the rows get one wrong extra candidate."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES.size, n)
    centers = rng.normal(size=(CLASSES.size, len(names))) * 4.0
    X = centers[y] + rng.normal(size=(n, len(names)))
    S = np.zeros((n, CLASSES.size), dtype=bool)
    S[np.arange(n), y] = True
    extra = (y + rng.integers(1, CLASSES.size, n)) % CLASSES.size
    noisy = rng.random(n) < 0.5
    S[np.flatnonzero(noisy), extra[noisy]] = True
    return PartialLabelDataset(X, S, y, CLASSES, "synthetic", info={"feature_names": list(names)})


def query_table(model, n=40, seed=1, with_candidates=True):
    """New rows around the training data, columns in reversed order, some with candidate sets."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(model.feature_names))) * 4.0
    table = pd.DataFrame(X, columns=list(model.feature_names))[list(model.feature_names)[::-1]]
    if with_candidates:
        names = [str(c) for c in model.classes]
        table["candidates"] = [
            None if i % 3 == 0 else "|".join(rng.choice(names, size=1 + i % 2, replace=False)) for i in range(n)
        ]
    return table


def log_fitted(uri, fitted, ds, register=None):
    run_id = start_run.fn(uri, "test", "train", {"method": fitted.method})
    out = log_model.fn(uri, run_id, fitted, input_example(ds), ds.summary(), register)
    end_run.fn(uri, run_id)
    return run_id, out


def holdout_report(ds, method, params, seed, threshold=None, conformal_alpha=None, knn="exact"):
    """The hold-out metrics recomputed from the library: the 80 % model predicts the 20 %, judged as a benchmark judges."""
    holdout = fit_holdout(ds, method, params, random_state=seed, knn=knn)
    pred = holdout.estimator.predict_with_reject(holdout.X)
    accept = pred.accept if threshold is None else pred.score > threshold
    keep = np.ones(holdout.rows.size, bool) if ds.y is not None else ds.S[holdout.rows].any(axis=1)

    def report(labels, accept):
        if ds.y is not None:
            return reject_report(ds.y[holdout.rows], labels, accept, n_classes=ds.n_classes)
        return partial_label_report(ds.S[holdout.rows][keep], labels[keep], accept[keep])

    options = {"native": report(pred.labels, accept)}
    if conformal_alpha is not None:
        sets = fit_set_predictor(ds, holdout, conformal_alpha).sets.predict_with_reject(holdout.X)
        options["conformal"] = {**report(sets.labels, sets.accept),
                                **set_report(sets.sets[keep], None if ds.y is None else ds.y[holdout.rows])}
    return options


def _python(code, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- the library: feature matching, review queue, atomic writes -------------------------------------


def test_prediction_equals_the_method_on_hand_scaled_features():
    ds = synthetic()
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=3)
    table = query_table(fitted)
    X, S = match_features(table, fitted.feature_names, fitted.classes)
    lo, hi = ds.X.min(axis=0), ds.X.max(axis=0)  # min-max scaling fitted on every training row
    oracle = make_method("pl_knn", {"n_neighbors": 5}, random_state=3).fit((ds.X - lo) / (hi - lo), ds.S)
    expected = oracle.predict_with_reject((X - lo) / (hi - lo), candidates=S)
    got = fitted.predict_frame(table)
    assert list(got["label"]) == list(CLASSES[expected.labels])
    np.testing.assert_allclose(got["score"], expected.score, rtol=1e-12)
    np.testing.assert_array_equal(got["accept"], expected.accept)


def test_columns_are_matched_by_name_and_bags_bound_the_label():
    fitted = fit_model(synthetic(), "pl_knn", {"n_neighbors": 5}, random_state=0)
    table = query_table(fitted)
    shuffled = table[list(np.random.default_rng(0).permutation(table.columns))]
    pd.testing.assert_frame_equal(fitted.predict_frame(table), fitted.predict_frame(shuffled))
    got = fitted.predict_frame(table)
    for cand, label in zip(table["candidates"], got["label"]):
        if isinstance(cand, str):
            assert label in cand.split("|")


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda t: t.drop(columns=["weight"]), ["missing", "weight"]),
        (lambda t: t.assign(colour=1.0), ["unexpected", "colour"]),
        (lambda t: t.drop(columns=["age"]).assign(Age=1.0), ["missing", "age", "unexpected", "Age"]),
        (lambda t: t.assign(height=np.where(np.arange(len(t)) == 4, np.inf, t["height"])), ["height", "row 4"]),
        (lambda t: t.assign(candidates="ant|eel"), ["candidates", "eel"]),
        (lambda t: t.iloc[:0], ["no rows"]),
    ],
)
def test_bad_tables_raise_typed_errors_naming_the_problem(change, words):
    fitted = fit_model(synthetic(), "pl_knn", {"n_neighbors": 5}, random_state=0)
    with pytest.raises(InvalidDataError) as info:
        fitted.predict_frame(change(query_table(fitted)), source="new.csv")
    for word in ["new.csv", *words]:
        assert word in str(info.value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.booleans()), min_size=1, max_size=30))
def test_review_queue_is_exactly_the_rejected_rows_least_certain_first(rows):
    scored = pd.DataFrame({
        "row": np.arange(len(rows)),
        "score": [s for s, _ in rows],
        "accept": [a for _, a in rows],
    })
    queue = review_queue(scored)
    expected = sorted((s, i) for i, (s, a) in enumerate(rows) if not a)  # brute force: sort (score, row)
    assert list(zip(queue["score"], queue["row"])) == expected


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_model_trained_on_a_table_expects_its_header(tmp_path, suffix):
    import pll

    ds = synthetic()
    table = pd.DataFrame(ds.X, columns=["height", "weight", "age"])
    table.insert(1, "candidates", ["|".join(CLASSES[row]) for row in ds.S])
    path = tmp_path / f"train{suffix}"
    table.to_csv(path, index=False) if suffix == ".csv" else table.to_parquet(path)
    fitted = fit_model(pll.load_dataset(path), "pl_knn", {"n_neighbors": 5}, random_state=0)
    assert fitted.feature_names == ("height", "weight", "age")
    query = query_table(fitted)
    pd.testing.assert_frame_equal(fitted.predict_frame(query), fit_model(ds, "pl_knn", {"n_neighbors": 5},
                                                                          random_state=0).predict_frame(query))


def test_a_given_threshold_decides_accept_for_every_method():
    ds = synthetic()
    query = query_table(fit_model(ds, "pl_knn", {"n_neighbors": 5}))
    for method in sorted(METHODS):
        native = fit_model(ds, method, None, random_state=0).predict_frame(query)
        cut = float(np.median(native["score"]))
        strict = fit_model(ds, method, None, random_state=0, threshold=cut)
        got = strict.predict_frame(query)
        assert strict.threshold == cut
        np.testing.assert_array_equal(got["accept"], native["score"] > cut)
        # The reasons follow the model's own decision; the evidence they rest on does not change.
        np.testing.assert_array_equal(got["reason"] == "none", got["accept"])
        pd.testing.assert_frame_equal(got.drop(columns=["accept", "reason"]), native.drop(columns=["accept", "reason"]))
    with pytest.raises(InvalidParameterError, match="threshold"):
        fit_model(ds, "pl_knn", None, threshold=float("nan"))


@pytest.mark.parametrize("threshold, reject_lambda", [(None, None), (0.6, None), (None, 0.1)])
def test_holdout_metrics_are_the_reject_report_of_the_rule_the_model_applies(threshold, reject_lambda):
    ds = synthetic()
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=4, threshold=threshold,
                       reject_lambda=reject_lambda, conformal_alpha=0.2)
    assert fitted.holdout_metrics == holdout_report(ds, "pl_knn", {"n_neighbors": 5}, 4, fitted.threshold, 0.2)
    if reject_lambda is not None:  # the threshold minimised R_λ on these rows: the same figure
        assert fitted.holdout_metrics["native"]["risk_0.10"] == fitted.calibration["risk"]
    without_sets = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=4, threshold=threshold,
                             reject_lambda=reject_lambda, conformal_alpha=None)
    assert list(without_sets.holdout_metrics) == ["native"]
    assert without_sets.holdout_metrics["native"] == fitted.holdout_metrics["native"]


def test_holdout_metrics_without_true_labels_judge_by_the_bags_leaving_empty_ones_out():
    full = synthetic(n=120)
    S = full.S.copy()
    S[::7] = False  # rows nobody labelled
    ds = PartialLabelDataset(full.X, S, None, CLASSES, "unlabelled", allow_empty_bags=True,
                             info={"feature_names": ["height", "weight", "age"]})
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=2, conformal_alpha=0.2)
    expected = holdout_report(ds, "pl_knn", {"n_neighbors": 5}, 2, conformal_alpha=0.2)
    assert fitted.holdout_metrics == expected
    assert "mcc" not in expected["native"] and "coverage" not in expected["conformal"]
    held_out = fit_holdout(ds, "pl_knn", {"n_neighbors": 5}, random_state=2).rows
    assert not ds.S[held_out].any(axis=1).all()  # some held-out rows were left out


def test_a_model_pickled_before_holdout_metrics_loads_without_them():
    fitted = fit_model(synthetic(), "pl_knn", {"n_neighbors": 5}, random_state=0)
    old = pickle.loads(pickle.dumps(fitted))
    del old.__dict__["holdout_metrics"]  # as a pickle of the former FittedModel has it
    assert pickle.loads(pickle.dumps(old)).holdout_metrics is None


def test_feature_named_like_an_output_column_is_refused():
    with pytest.raises(InvalidDataError, match="score"):
        fit_model(synthetic(names=("height", "score", "age")), "pl_knn", {"n_neighbors": 5})
    with pytest.raises(InvalidDataError, match="label"):
        scored_table(pd.DataFrame({"label": [1]}), pd.DataFrame({"label": ["ant"]}))


def test_score_file_twice_gives_the_same_bytes_and_a_bad_file_leaves_nothing(tmp_path):
    fitted = fit_model(synthetic(), "pl_knn", {"n_neighbors": 5}, random_state=0)
    table = query_table(fitted, n=60)
    table.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "scored.parquet"
    summary, scored = score_file(fitted, tmp_path / "new.csv", out)
    first = out.read_bytes(), review_path(out).read_bytes()
    score_file(fitted, tmp_path / "new.csv", out)
    assert (out.read_bytes(), review_path(out).read_bytes()) == first
    assert summary["rows"] == 60 and summary["accepted"] + summary["rejected"] == 60
    assert summary["rejected"] == int((~scored["accept"]).sum()) > 0
    back = pd.read_parquet(out)
    assert list(back["row"]) == list(range(60))
    np.testing.assert_allclose(back["height"], table["height"])
    queue = pd.read_parquet(review_path(out))
    assert len(queue) == summary["rejected"] and not queue["accept"].any()
    assert np.all(np.diff(queue["score"]) >= 0)

    table.drop(columns=["age"]).to_csv(tmp_path / "bad.csv", index=False)
    before = sorted(tmp_path.iterdir())
    bad_out = tmp_path / "bad.scored.parquet"
    with pytest.raises(InvalidDataError, match="age"):
        score_file(fitted, tmp_path / "bad.csv", bad_out)
    with pytest.raises(DataFileError, match="no such file"):
        score_file(fitted, tmp_path / "absent.csv", bad_out)
    with pytest.raises(InvalidParameterError, match="does not exist"):
        score_file(fitted, tmp_path / "new.csv", tmp_path / "nowhere" / "scored.parquet")
    assert sorted(tmp_path.iterdir()) == before  # nothing written, no folder made


@pytest.fixture
def umask_027():
    """A umask other than the usual 022, so that permissions show that it was applied."""
    old = os.umask(0o027)
    try:
        yield 0o640
    finally:
        os.umask(old)


def test_outputs_get_the_permissions_open_would_give(tmp_path, umask_027):
    fitted = fit_model(synthetic(), "pl_knn", {"n_neighbors": 5}, random_state=0)
    query_table(fitted).to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "scored.parquet"
    score_file(fitted, tmp_path / "new.csv", out)
    assert {oct(p.stat().st_mode & 0o777) for p in (out, review_path(out))} == {oct(umask_027)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv", "scored.parquet", "scored.review.parquet"]


@pytest.mark.parametrize(
    "name, make, error, words",
    [
        ("out.csv", None, InvalidParameterError, [".parquet"]),
        ("nowhere/out.parquet", None, InvalidParameterError, ["nowhere", "does not exist"]),
        ("plain/out.parquet", lambda p: p.parent.write_text("x"), InvalidParameterError, ["plain", "not a folder"]),
        ("out.parquet", lambda p: p.mkdir(), InvalidParameterError, ["is a folder"]),
        ("out.parquet", lambda p: (p.parent / "out.review.parquet").mkdir(), InvalidParameterError,
         ["out.review.parquet", "is a folder"]),
    ],
)
def test_output_paths_that_cannot_be_written_are_refused_in_one_line(tmp_path, name, make, error, words):
    path = tmp_path / name
    if make:
        make(path)
    with pytest.raises(error) as info:
        check_output_path(path)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_output_in_a_folder_nobody_may_write_is_refused(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root may write into any folder")
    (tmp_path / "locked").mkdir(mode=0o555)
    with pytest.raises(InvalidParameterError, match="not writable"):
        check_output_path(tmp_path / "locked" / "out.parquet")


@pytest.mark.parametrize(
    "name, make, words",
    [
        ("absent.csv", None, ["no such file"]),
        ("new.txt", lambda p: p.write_text("a,b"), ["unsupported file type .txt"]),
        ("folder.csv", lambda p: p.mkdir(), ["not a file"]),
        ("empty.parquet", lambda p: p.write_bytes(b""), ["empty"]),
    ],
)
def test_input_paths_that_cannot_be_read_are_refused_in_one_line(tmp_path, name, make, words):
    path = tmp_path / name
    if make:
        make(path)
    with pytest.raises(DataFileError) as info:
        check_input_path(path)
    for word in [str(path), *words]:
        assert word in str(info.value)


def test_path_checks_import_neither_prefect_nor_mlflow():
    code = (
        "import sys\n"
        "from pll.errors import PllError\n"
        "from pll.serving import check_input_path, check_output_path\n"
        "for check, path in ((check_output_path, '/proc/nope/out.parquet'), (check_input_path, 'absent.csv')):\n"
        "    try:\n"
        "        check(path)\n"
        "    except PllError as exc:\n"
        "        print(exc)\n"
        "print(sorted(m for m in ('prefect', 'mlflow') if m in sys.modules))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "/proc/nope/out.parquet: cannot write there, the folder /proc/nope does not exist",
        "absent.csv: no such file",
        "[]",
    ]


# --- MLflow: log, load in a fresh process, registry, unknown URIs -----------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite MLflow store for the module (creating a store's tables takes seconds)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    MlflowClient(uri).search_experiments()
    return uri


def test_round_trip_through_mlflow_in_a_fresh_process(store, tmp_path):
    """Every registered method: fit, log, load in a new Python process, identical predictions."""
    ds = synthetic()
    before, uris = {}, {}
    for method in sorted(METHODS):
        fitted = fit_model(ds, method, None, random_state=7)
        uris[method] = log_fitted(store, fitted, ds)[1]["model_uri"]
        query = query_table(fitted, n=50)
        before[method] = fitted.predict_frame(query)
    query.to_parquet(tmp_path / "query.parquet")
    code = (
        "import mlflow.pyfunc, pandas as pd\n"
        f"query = pd.read_parquet({str(tmp_path / 'query.parquet')!r})\n"
        f"for method, uri in {uris!r}.items():\n"
        f"    mlflow.pyfunc.load_model(uri).predict(query).to_parquet(f'{tmp_path}/{{method}}.parquet')\n"
    )
    proc = _python(code, env={"MLFLOW_TRACKING_URI": store})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for method, expected in before.items():
        after = pd.read_parquet(tmp_path / f"{method}.parquet")
        pd.testing.assert_frame_equal(after, expected, obj=method)
        assert {"label", "accept", "score"} <= set(after.columns)
        assert set(after["label"]) <= set(CLASSES)


def test_an_ensembles_member_parameters_are_recorded_by_name_and_the_members_are_not(store):
    pytest.importorskip("torch", reason="SoftVoting's default members need the deep extra (PyTorch)")
    import yaml

    from pll_pipeline.tracking.models import describe

    ds = synthetic()
    params = {"proden__max_epochs": 2, "vi_pll__max_epochs": 2, "vi_pll__pretrain_epochs": 1}
    fitted = fit_model(ds, "soft_voting", params, random_state=0)
    recorded = describe(fitted)["method_params"]
    assert {k: recorded[k] for k in params} == params and recorded["vi_pll__likelihood_weight"] == 10.0
    assert not {"estimators", "proden", "vi_pll"} & set(recorded)
    assert yaml.safe_load(yaml.safe_dump(recorded)) == json.loads(json.dumps(recorded))
    _, out = log_fitted(store, fitted, ds)
    assert MlflowClient(store).get_logged_model(out["model_id"]).params["method"] == "soft_voting"


def test_logged_model_records_signature_example_fingerprint_threshold_and_registry(store):
    ds = synthetic()
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=0)
    run_id, out = log_fitted(store, fitted, ds, register="pll-test-model")
    client = MlflowClient(store)
    logged = client.get_logged_model(out["model_id"])
    assert logged.source_run_id == run_id
    assert logged.params["data_fingerprint"] == ds.fingerprint()
    assert json.loads(logged.params["threshold"]) == 0.5
    run = client.get_run(run_id)
    assert run.data.tags["data_fingerprint"] == ds.fingerprint()
    assert json.loads(run.data.params["reject_threshold"]) == 0.5
    assert [m.model_id for m in run.outputs.model_outputs] == [out["model_id"]]
    assert out["registered_uri"] == "models:/pll-test-model/1"
    version = client.get_model_version("pll-test-model", "1")
    assert version.run_id == run_id and version.source == logged.artifact_location
    with pytest.raises(InvalidParameterError, match="not registered"):
        log_fitted(store, fitted, ds, register="bad/name")
    client.set_registered_model_alias("pll-test-model", "champion", "1")
    for uri in ("models:/pll-test-model/latest", "models:/pll-test-model@champion"):
        assert load_model(uri, store)[1]["model_id"] == out["model_id"]
    reloaded, source = load_model(out["registered_uri"], store)
    assert source["run_id"] == run_id and source["model_id"] == out["model_id"]
    pd.testing.assert_frame_equal(reloaded.predict_frame(query_table(fitted)), fitted.predict_frame(query_table(fitted)))


def test_logged_model_and_its_run_carry_the_holdout_metrics(store):
    ds = synthetic()
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5}, random_state=0, reject_lambda=0.1, conformal_alpha=0.2)
    run_id, out = log_fitted(store, fitted, ds)
    client = MlflowClient(store)
    quality = run_metrics(fitted.holdout_metrics)
    assert {"accuracy", "mcc", "native.rejection_rate", "native.risk_0.10", "conformal.coverage",
            "conformal.mean_set_size", "conformal.accuracy"} <= set(quality)
    calibration = {f"holdout.{k}": v for k, v in fitted.calibration.items()}
    assert client.get_run(run_id).data.metrics == {**quality, **calibration}
    assert {m.key: m.value for m in client.get_logged_model(out["model_id"]).metrics} == quality
    assert all(m.model_id == out["model_id"] for m in client.get_logged_model(out["model_id"]).metrics)


def test_logged_model_leaves_input_checks_to_pll_and_shows_an_example(store, tmp_path):
    """No input schema (MLflow would drop unknown columns before pll sees them); the example shows the input."""
    import mlflow.artifacts
    import mlflow.pyfunc
    from mlflow.models import Model

    from pll_pipeline.tracking.served import InputRefused

    ds = synthetic()
    fitted = fit_model(ds, "pl_knn", {"n_neighbors": 5})
    _, out = log_fitted(store, fitted, ds)
    local = mlflow.artifacts.download_artifacts(artifact_uri=artifact_location(out["model_uri"], store),
                                                dst_path=str(tmp_path))
    model = Model.load(local)
    assert model.signature.inputs is None
    query = query_table(fitted)
    with pytest.raises(InputRefused) as info:
        mlflow.pyfunc.load_model(local).predict(query.assign(colour=1.0))
    with pytest.raises(InvalidDataError) as pll_error:
        fitted.predict_frame(query.assign(colour=1.0), source="model input")
    assert info.value.line == str(pll_error.value) and "unexpected column(s) colour" in info.value.line
    outputs = [c.name for c in model.signature.outputs.inputs]
    assert outputs[:4] == ["label", "accept", "score", "guess"]
    example = json.loads((Path(local) / "input_example.json").read_text())
    assert example["columns"] == ["height", "weight", "age", "candidates"]
    assert model.metadata["pll"]["data_fingerprint"] == ds.fingerprint()


@pytest.mark.parametrize(
    "uri", ["models:/m-0123456789abcdef", "models:/no-such-name/1", "models:/no-such-name@champion",
            "runs:/0123abcd/model", "no/such/folder", "http://127.0.0.1:9/", "https://models.example/m"]
)
def test_unknown_model_uri_is_a_typed_error(uri, store):
    with pytest.raises(ModelNotFoundError) as info:
        load_model(uri, store)
    assert isinstance(info.value, PllError) and uri in str(info.value)


def test_a_run_without_a_model_and_a_name_without_versions_are_typed_errors(store):
    client = MlflowClient(store, registry_uri=store)
    run = client.create_run(client.create_experiment("no-models"))
    client.create_registered_model("no-versions-yet")
    for uri in (f"runs:/{run.info.run_id}/model", "models:/no-versions-yet/latest", "models:/no-versions-yet/1"):
        with pytest.raises(ModelNotFoundError, match="not found"):
            load_model(uri, store)


# --- flows: train, score one file, score a folder --------------------------------------------------


@pytest.fixture(scope="module")
def trained(prefect_harness, store):
    """The digits model, trained by the flow (fully labelled, so noise 'auto' adds partial labels)."""
    from pll_pipeline.flows.train import train

    uri = store
    result = train(dataset="digits", method="pl_knn", method_params={"n_neighbors": 5}, seed=0,
                   tracking_uri=uri, experiment="train-score")
    fitted, source = load_model(result["model_uri"], uri)
    return uri, result, fitted, source


def test_train_flow_logs_the_holdout_report_on_its_run_and_model(prefect_harness, store):
    import pll
    from pll_pipeline.flows.train import train

    uri = store
    result = train(dataset="iris", method="pl_knn", method_params={"n_neighbors": 5}, seed=3, reject_lambda=0.1,
                   conformal_alpha=0.2, tracking_uri=uri, experiment="train-metrics")
    client = MlflowClient(uri)
    run = client.get_run(result["run_id"])
    ds = pll.noise.apply_noise(pll.load_dataset("iris"), "auto", random_state=3)
    assert run.data.tags["data_fingerprint"] == ds.fingerprint()  # the flow's data, rebuilt
    threshold = json.loads(run.data.params["reject_threshold"])
    expected = run_metrics(holdout_report(ds, "pl_knn", {"n_neighbors": 5}, 3, threshold, 0.2, knn="auto"))
    metrics = run.data.metrics
    for name in ("accuracy", "mcc", "native.rejection_rate", "native.risk_0.10", "conformal.coverage",
                 "conformal.mean_set_size"):
        assert metrics[name] == expected[name], name
    assert {k: v for k, v in metrics.items() if not k.startswith("holdout.")} == expected
    assert metrics["native.risk_0.10"] == metrics["holdout.risk"]
    assert {m.key: m.value for m in client.get_logged_model(result["model_id"]).metrics} == expected
    assert "in-sample" in run.data.tags["mlflow.note.content"]


def test_train_flow_without_true_labels_logs_the_partial_label_report(prefect_harness, store, tmp_path):
    import pll
    from pll_pipeline.flows.train import train

    uri = store
    full = synthetic()
    table = pd.DataFrame(full.X, columns=["height", "weight", "age"])
    table["candidates"] = ["|".join(CLASSES[row]) for row in full.S]
    table.to_csv(tmp_path / "bags.csv", index=False)
    result = train(dataset=str(tmp_path / "bags.csv"), method="pl_knn", method_params={"n_neighbors": 5}, seed=1,
                   conformal_alpha=None, tracking_uri=uri, experiment="train-metrics")
    ds = pll.load_dataset(tmp_path / "bags.csv")
    assert ds.y is None
    expected = run_metrics(holdout_report(ds, "pl_knn", {"n_neighbors": 5}, 1, knn="auto"))
    assert MlflowClient(uri).get_run(result["run_id"]).data.metrics == expected
    assert "accuracy" in expected and "native.risk_0.10" in expected and "mcc" not in expected


def digits_rows(fitted, rows):
    import pll

    ds = pll.load_dataset("digits")
    table = pd.DataFrame(ds.X[rows], columns=list(fitted.feature_names))
    return table[list(fitted.feature_names)[::-1]]


def test_train_flow_logs_a_model_trained_on_partial_labels(trained):
    uri, result, fitted, source = trained
    run = MlflowClient(uri).get_run(result["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["method"] == "pl_knn" and run.data.params["noise"] == "auto"
    assert source["run_id"] == result["run_id"]
    assert fitted.estimator.S_train_.shape == (1797, 10)
    assert fitted.estimator.S_train_.sum(axis=1).max() > 1  # 'auto' noise gave partial labels
    assert list(fitted.classes) == [str(c) for c in range(10)]


def test_train_flow_prepares_real_data_with_the_dst_pll_protocol(trained, shared_data):
    from pll_pipeline.flows.train import train

    uri = trained[0]
    result = train(dataset=str(shared_data / "realworld" / "msrc-v2.mat"), protocol="dst-pll", method="pl_knn",
                   tracking_uri=uri, experiment="train-score")
    params = MlflowClient(uri).get_run(result["run_id"]).data.params
    assert params["protocol"] == "dst-pll" and params["noise"] == "auto"
    fitted, _ = load_model(result["model_uri"], uri)
    assert fitted.estimator.S_train_.shape == (1663, 19)  # the protocol's rows and labels, its own bags


def test_score_flow_writes_outputs_and_logs_a_linked_run(trained, tmp_path):
    from pll_pipeline.flows.score import score_one

    uri, result, fitted, _ = trained
    digits_rows(fitted, np.arange(0, 1797, 6)).to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "scored.parquet"
    summary = score_one(model_uri=result["model_uri"], input=str(tmp_path / "new.csv"), output=str(out),
                        tracking_uri=uri, experiment="scoring")
    scored = pd.read_parquet(out)
    queue = pd.read_parquet(tmp_path / "scored.review.parquet")
    assert len(scored) == 300 == summary["rows"]
    assert summary["rejected"] == len(queue) == int((~scored["accept"]).sum())
    assert np.all(np.diff(queue["score"]) >= 0)
    # Digits rows are (near-)copies of training rows: most are accepted and agree with the true digit.
    import pll

    y = pll.load_dataset("digits").y[np.arange(0, 1797, 6)]
    assert (scored["label"].astype(int) == y).mean() > 0.9
    client = MlflowClient(uri)
    run = client.get_run(summary["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["pll.model_run_id"] == result["run_id"]
    assert run.data.tags["pll.model_uri"] == result["model_uri"]
    assert run.data.metrics["accepted"] == summary["accepted"]
    assert run.data.metrics["rejected"] == summary["rejected"]
    check_reasons_and_neighbors(scored, queue, fitted)
    by_reason = {code: run.data.metrics[f"rejected_{code}"] for code in REJECTIONS}
    assert by_reason == queue["reason"].value_counts().reindex(list(REJECTIONS), fill_value=0).to_dict()
    assert [m.model_id for m in run.inputs.model_inputs] == [result["model_id"]]
    png = client.download_artifacts(summary["run_id"], "score_distribution.png", str(tmp_path))
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def check_reasons_and_neighbors(scored, queue, fitted):
    """Every scored row has a reason (``none`` iff accepted) and its nearest training rows, as the model sees them."""
    assert ((scored["reason"] == "none") == scored["accept"]).all()
    assert set(queue["reason"]) <= set(REJECTIONS) and len(queue)
    rows = np.stack(scored["neighbor_rows"].to_numpy())
    assert rows.shape == (len(scored), REVIEW_NEIGHBORS)
    X = fitted.transformer.transform(scored[list(fitted.feature_names)].to_numpy())
    expected = kneighbors(fitted.estimator.X_train_, X, REVIEW_NEIGHBORS)
    np.testing.assert_allclose(np.stack(scored["neighbor_distances"].to_numpy()), expected.distances, rtol=1e-12)
    S = fitted.estimator.S_train_
    bags = [["|".join(fitted.classes[S[r]]) for r in row] for row in rows]
    assert [list(b) for b in scored["neighbor_bags"]] == bags
    assert {"reason", "neighbor_rows", "neighbor_bags", "neighbor_distances"} <= set(queue.columns)


def test_score_flow_on_a_mismatched_file_fails_and_leaves_no_output(trained, tmp_path):
    from pll_pipeline.flows.score import score_one

    uri, result, fitted, _ = trained
    digits_rows(fitted, np.arange(20)).drop(columns=["x5"]).rename(columns={"x7": "pixel7"}).to_parquet(
        tmp_path / "bad.parquet"
    )
    out = tmp_path / "scored.parquet"
    with pytest.raises(InvalidDataError) as info:
        score_one(model_uri=result["model_uri"], input=str(tmp_path / "bad.parquet"), output=str(out),
                  tracking_uri=uri, experiment="scoring-bad")
    for word in ["bad.parquet", "x5", "x7", "pixel7"]:
        assert word in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.parquet"]
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("scoring-bad").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]


def test_unknown_model_fails_the_flow_with_a_typed_error(trained, tmp_path):
    from pll_pipeline.flows.score import score_one

    uri, _, fitted, _ = trained
    digits_rows(fitted, np.arange(5)).to_csv(tmp_path / "new.csv", index=False)
    with pytest.raises(ModelNotFoundError, match="m-ffffffffffffffff"):
        score_one(model_uri="models:/m-ffffffffffffffff", input=str(tmp_path / "new.csv"),
                  output=str(tmp_path / "o.parquet"), tracking_uri=uri)
    assert not (tmp_path / "o.parquet").exists()


def test_score_flow_refuses_unusable_paths_before_loading_the_model(trained, tmp_path):
    from pll_pipeline.flows.score import score_one

    uri, result, fitted, _ = trained
    digits_rows(fitted, np.arange(5)).to_csv(tmp_path / "new.csv", index=False)
    cases = [(str(tmp_path / "new.csv"), "/proc/nope/out.parquet", InvalidParameterError, "/proc/nope does not exist"),
             (str(tmp_path / "absent.csv"), str(tmp_path / "o.parquet"), DataFileError, "absent.csv: no such file")]
    for input, output, error, words in cases:
        with pytest.raises(error, match=words):
            score_one(model_uri="models:/m-ffffffffffffffff", input=input, output=output, tracking_uri=uri,
                      experiment="scoring-paths")
    # Refused before the (unknown) model was looked up and before a scoring run was started.
    assert MlflowClient(uri).get_experiment_by_name("scoring-paths") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.csv"]


def _warnings(caplog):
    return [(r.getMessage(), r.exc_info) for r in caplog.records if r.levelno >= logging.WARNING]


def test_folder_flow_without_its_folder_or_model_logs_one_line_and_completes(trained, tmp_path, caplog):
    from pll_pipeline.flows.score import score_folder

    uri, result, fitted, _ = trained
    inbox, outbox = tmp_path / "incoming", tmp_path / "scored"
    kwargs = dict(model_uri="models:/pll-model-to-come/latest", input_dir=str(inbox), output_dir=str(outbox),
                  tracking_uri=uri, experiment="waiting")
    with caplog.at_level(logging.INFO):
        state = score_folder(**kwargs, return_state=True)
    assert state.is_completed()
    line = f"{inbox}: no such folder; nothing to score until it is created"
    assert state.result() == {"scored": {}, "skipped": [], "waiting": line}
    assert _warnings(caplog) == [(line, None)]

    inbox.mkdir()
    digits_rows(fitted, np.arange(10)).to_csv(inbox / "a.csv", index=False)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        state = score_folder(**kwargs, return_state=True)
    assert state.is_completed()
    waiting = state.result()["waiting"]
    assert "models:/pll-model-to-come/latest" in waiting and f"1 new file(s) in {inbox} wait for it" in waiting
    assert _warnings(caplog) == [(waiting, None)]  # one line, no traceback, no failed task
    assert not outbox.exists()

    # Once the model exists, the file that waited is scored.
    done = score_folder(**{**kwargs, "model_uri": result["model_uri"]})
    assert list(done["scored"]) == ["a.csv"] and done["waiting"] is None


def test_folder_flow_scores_new_files_once_and_retries_failures(trained, tmp_path, umask_027):
    from pll_pipeline.flows.score import score_folder

    uri, result, fitted, _ = trained
    inbox, outbox = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    digits_rows(fitted, np.arange(0, 40)).to_csv(inbox / "a.csv", index=False)
    digits_rows(fitted, np.arange(40, 70)).to_parquet(inbox / "b.parquet")
    digits_rows(fitted, np.arange(70, 80)).drop(columns=["x0"]).to_csv(inbox / "c.csv", index=False)
    (inbox / ".d.csv.partial").write_text("being copied")
    kwargs = dict(model_uri=result["model_uri"], input_dir=str(inbox), output_dir=str(outbox),
                  tracking_uri=uri, experiment="folder")

    with pytest.raises(FilesFailedError, match="c.csv"):
        score_folder(**kwargs)
    ledger = read_ledger(outbox)
    assert {n: e["status"] for n, e in ledger.items()} == {"a.csv": "scored", "b.parquet": "scored", "c.csv": "failed"}
    assert "x0" in ledger["c.csv"]["error"]
    outputs = {p: p.read_bytes() for p in (folder_output(outbox, "a.csv"), folder_output(outbox, "b.parquet"))}
    written = [*outputs, review_path(folder_output(outbox, "a.csv")), outbox / LEDGER]
    assert {oct(p.stat().st_mode & 0o777) for p in written} == {oct(umask_027)}
    assert len(pd.read_parquet(folder_output(outbox, "a.csv"))) == 40
    assert not folder_output(outbox, "c.csv").exists()

    # Second run: a and b are not scored again, c is retried (and fails again).
    with pytest.raises(FilesFailedError, match="c.csv"):
        score_folder(**kwargs)
    ledger2 = read_ledger(outbox)
    assert ledger2["a.csv"] == ledger["a.csv"] and ledger2["b.parquet"] == ledger["b.parquet"]
    assert ledger2["c.csv"]["attempts"] == 2
    assert {p: p.read_bytes() for p in outputs} == outputs

    # The file is fixed and a new one arrives: exactly those two are scored.
    digits_rows(fitted, np.arange(70, 80)).to_csv(inbox / "c.csv", index=False)
    digits_rows(fitted, np.arange(80, 85)).to_csv(inbox / "e.csv", index=False)
    done = score_folder(**kwargs)
    assert sorted(done["scored"]) == ["c.csv", "e.csv"] and done["skipped"] == ["a.csv", "b.parquet"]
    assert read_ledger(outbox)["c.csv"]["status"] == "scored"
    assert score_folder(**kwargs)["scored"] == {}
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("folder").experiment_id])
    statuses = sorted(r.info.status for r in runs)
    assert statuses == ["FAILED", "FAILED", "FINISHED", "FINISHED", "FINISHED", "FINISHED"]
    assert (outbox / LEDGER).is_file() and not any(p.suffix == ".tmp" for p in outbox.iterdir())


# --- the command line -----------------------------------------------------------------------------


def _session_outputs(text):
    """The output of each command of a ``tests/cli_session.py`` process, cut at its ``$ pll`` lines."""
    return [part.split("\n", 1)[1] if "\n" in part else "" for part in text.split("$ pll ")[1:]]


def test_cli_train_prints_the_model_uri_last_and_score_uses_it(tmp_path):
    import pll as lib

    uri = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri}
    ds = lib.load_dataset("iris")
    pd.DataFrame(ds.X, columns=[f"x{j}" for j in range(4)]).to_csv(tmp_path / "new.csv", index=False)
    # The three commands one after the other in one process, as a shell session runs them
    # (tests/cli_session.py, which stops at the first that fails): Python and the imports are paid once.
    commands = [["train", "--dataset", "iris", "--method", "pl_knn", "--register", "iris-knn", "--reject-lambda", "0.1",
                 "--conformal-alpha", "0.2"],
                ["score", "--model", "models:/iris-knn/1", "--input", "new.csv", "--output", "scored.parquet"],
                ["score", "--model", "models:/m-0000", "--input", "new.csv", "--output", "x.parquet"]]
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_session.py"), json.dumps(commands)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    stdout, stderr = _session_outputs(done.stdout), _session_outputs(done.stderr)
    # Three commands started: train and the first score exited 0; the last one's status is the process's.
    assert len(stdout) == len(stderr) == 3, done.stderr[-3000:]
    assert done.returncode == 2, done.stderr[-3000:]

    lines = stdout[0].strip().splitlines()
    model_uri = lines[-1]
    assert model_uri.startswith("models:/m-")
    assert any("models:/iris-knn/1" in line for line in lines)

    assert (tmp_path / "scored.parquet").is_file() and (tmp_path / "scored.review.parquet").is_file()
    assert "150 rows" in stdout[1]
    # Each row's conformal set, as labels and a size, in the output and in the review queue.
    rows, queue = pd.read_parquet(tmp_path / "scored.parquet"), pd.read_parquet(tmp_path / "scored.review.parquet")
    labels = rows["set"].map(lambda labels: labels.split("|") if labels else [])  # "" is the empty set
    assert (labels.map(len) == rows["set_size"]).all()
    assert set(labels.explode().dropna()) <= set(ds.classes) and {"set", "set_size"} <= set(queue.columns)
    run = MlflowClient(uri).get_run(load_model(model_uri, uri)[1]["run_id"])
    assert run.data.params["reject_lambda"] == "0.1" and run.data.params["conformal_alpha"] == "0.2"
    assert run.data.metrics["holdout.risk"] <= 0.1 + 1e-12  # the chosen threshold beats rejecting all on the hold-out

    assert "models:/m-0000" in stderr[2] and "Traceback" not in stderr[2]
    assert not (tmp_path / "x.parquet").exists()


def test_training_keys_name_the_neighbors_and_scoring_keys_pass_through(tmp_path):
    """An ``id`` column is a row key, never a feature: it names the nearest training rows and the audit's rows."""
    import pll
    from pll.audit import audit_dataset

    ds = synthetic()
    keys = [f"order-{i:03d}" for i in range(ds.n_rows)]
    table = pd.DataFrame(ds.X, columns=["height", "weight", "age"]).assign(
        candidates=["|".join(CLASSES[row]) for row in ds.S], id=keys)
    table.to_csv(tmp_path / "train.csv", index=False)
    loaded = pll.load_dataset(tmp_path / "train.csv")
    assert loaded.info["feature_names"] == ["height", "weight", "age"] and loaded.ids.tolist() == keys
    table.drop(columns="id").to_csv(tmp_path / "keyless.csv", index=False)
    assert loaded.fingerprint() == pll.load_dataset(tmp_path / "keyless.csv").fingerprint()  # keys are not data
    fitted = fit_model(loaded, "dst_pll", random_state=0)
    query = query_table(fitted).assign(id=[f"new-{i}" for i in range(40)])
    scored = scored_table(query, fitted.predict_frame(query))
    rows = np.stack(scored["neighbor_rows"].to_numpy())
    assert [list(k) for k in scored["neighbor_ids"]] == [[keys[r] for r in row] for row in rows]
    assert scored["id"].tolist() == query["id"].tolist()
    audit = audit_dataset(loaded)
    assert list(audit.columns[:2]) == ["row", "id"]
    assert audit["id"].tolist() == [keys[r] for r in audit["row"]]
    table.loc[7, "id"] = keys[2]
    table.to_csv(tmp_path / "repeated.csv", index=False)
    with pytest.raises(DataFileError, match=r"line 9, row 7: column 'id': the key 'order-002' is used by an earlier row"):
        pll.load_dataset(tmp_path / "repeated.csv")
