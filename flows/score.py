"""Scoring flows: one file, or every new file of a folder (the scheduled deployment).

Each scored file is its own MLflow run, linked to the model it used; the
folder flow keeps a ledger in its output folder (``.pll-scoring-ledger.json``)
so that a file is scored once, and a file that failed is retried on the next
run.  Run a folder flow at most once at a time (the deployment sets a
concurrency limit of one): two runs over the same folder would both score
its new files.  A folder flow whose input folder or model does not exist yet
(a schedule deployed before either was made) logs one line and completes:
there is nothing to do until they appear.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from pll_pipeline.flows import LOG_PRINTS, checks
from pll.experiment import catalog
from pll.errors import FilesFailedError
from pll.serving import (
    file_fingerprint,
    folder_output,
    pending_files,
    read_ledger,
    write_ledger,
)
from pll_pipeline.tasks.scoring import score
from pll_pipeline.tracking.scoring import link_model, load, load_if_any, log_scoring
from pll_pipeline.flows.links import flow_run_tags, tag_flow_run
from pll_pipeline.flows.tracked import ending_on_error
from pll_pipeline.tracking.runs import end_run, resolve_tracking_uri, start_run


@flow(name="pll-score", log_prints=LOG_PRINTS)
def score_one(
    model_uri: str,
    input: str,
    output: str,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
) -> dict:
    """Score the table ``input`` with the model ``model_uri``; write ``output`` and its review queue.

    Returns the counts (``rows``, ``accepted``, ``rejected``, ...), the paths
    ``output`` and ``review``, and the scoring ``run_id``.  A path that cannot
    be read or written is refused before the model is loaded or a run started.
    """
    checks.scoring(locals())  # first: locals() are the parameters
    tracking_uri = resolve_tracking_uri(tracking_uri)
    fitted, source = load(model_uri, tracking_uri)
    return _score_and_log(fitted, source, input, output, tracking_uri, experiment)


@flow(name="pll-score-folder", log_prints=LOG_PRINTS)
def score_folder(
    model_uri: str,
    input_dir: str,
    output_dir: str,
    tracking_uri: str | None = None,
    experiment: str = catalog.DEFAULT_EXPERIMENT,
) -> dict:
    """Score every CSV/Parquet file of ``input_dir`` not scored before into ``output_dir``.

    Outputs are ``<input name>.scored.parquet`` and its review queue
    (``output_dir`` is created when there is something to write). Files
    that fail are recorded in the ledger and retried on the next run; after
    trying every file the flow fails with :class:`~pll.serving.FilesFailedError`
    naming them. Returns ``scored`` (file name -> scoring run id),
    ``skipped`` (names scored before) and ``waiting``: None, or the line
    logged when ``input_dir`` or the model does not exist (the run completes,
    its new files wait for the next run).
    """
    tracking_uri = resolve_tracking_uri(tracking_uri)
    logger = get_run_logger()
    if not Path(input_dir).is_dir():
        return _waiting(logger, f"{input_dir}: no such folder; nothing to score until it is created")
    ledger = read_ledger(output_dir)
    pending = pending_files(input_dir, output_dir, ledger)
    new = {p.name for p in pending}
    skipped = sorted(name for name, entry in ledger.items() if entry.get("status") == "scored" and name not in new)
    if not pending:
        logger.info("no new files in %s", input_dir)
        return {"scored": {}, "skipped": skipped, "waiting": None}
    fitted, source = load_if_any(model_uri, tracking_uri)
    if fitted is None:
        return _waiting(logger, f"{source}; {len(pending)} new file(s) in {input_dir} wait for it", skipped)
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    scored, failed = {}, {}
    for path in pending:
        entry = {"fingerprint": file_fingerprint(path), "model_uri": model_uri,
                 "attempts": int(ledger.get(path.name, {}).get("attempts", 0)) + 1}
        try:
            result = _score_and_log(fitted, source, str(path), str(folder_output(output_dir, path)),
                                    tracking_uri, experiment)
        except Exception as exc:
            failed[path.name] = str(exc)
            entry.update(status="failed", error=str(exc))
            logger.error("could not score %s: %s", path, exc)
        else:
            scored[path.name] = result["run_id"]
            entry.update(status="scored", output=result["output"], review=result["review"], run_id=result["run_id"],
                         rows=result["rows"], accepted=result["accepted"], rejected=result["rejected"])
        ledger[path.name] = entry
        write_ledger(output_dir, ledger)
    if failed:
        raise FilesFailedError(
            f"{len(failed)} of {len(pending)} new file(s) in {input_dir} failed and will be retried: "
            + "; ".join(f"{name}: {err}" for name, err in failed.items())
        )
    return {"scored": scored, "skipped": skipped, "waiting": None}


def _waiting(logger, line, skipped=()):
    """Nothing to do yet: one warning line (no traceback) and a completed run."""
    logger.warning(line)
    return {"scored": {}, "skipped": sorted(skipped), "waiting": line}


def _score_and_log(fitted, source, input_path, output_path, tracking_uri, experiment):
    """One scoring run: score the file, log counts and figure; a failure marks the run FAILED."""
    config = {"model_uri": source["model_uri"], "input": str(input_path), "output": str(output_path)}
    tags = {"pll.kind": "scoring", "input_fingerprint": _input_fingerprint(input_path)}
    run_id = start_run(tracking_uri, experiment, f"score-{Path(input_path).name}", config,
                       tags={**tags, **flow_run_tags()})
    tag_flow_run(run_id)
    with ending_on_error(tracking_uri, run_id):
        link_model(tracking_uri, run_id, source)
        summary, scored = score(fitted, input_path, output_path)
        log_scoring(tracking_uri, run_id, summary, scored, fitted.threshold)
    end_run(tracking_uri, run_id)
    get_run_logger().info(f"{input_path}: {summary['accepted']} accepted, {summary['rejected']} rejected -> {output_path}")
    return {**summary, "run_id": run_id}


def _input_fingerprint(path):
    try:
        return file_fingerprint(path)
    except OSError:
        return "unreadable"
