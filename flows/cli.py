"""The pll command line: run pipelines, train and score models, audit bags, list data sets."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pll_pipeline.flows  # noqa: F401  (sets Prefect's environment before Prefect is imported)
from pll.experiment import catalog
from pll.errors import PllError
from pll.utils.progress import Stopped
from pll.neighbors.registry import BACKENDS, DEFAULT_BACKEND

from . import ui
from .memory import return_freed_memory
from .server import STARTUP_TIMEOUT_SECONDS, TemporaryServerError, temporary_server

# Nothing above imports Prefect, MLflow, scikit-learn or numba: ``pll --help`` answers at once, and a bad
# argument is refused (:func:`preflight`) before a server starts.


class _OneLineInputErrors(logging.Filter):
    """Leave a bad input's error to the command's one ``pll: error:`` line.

    Prefect would also log it with its traceback, as the failed task's and the
    failed flow's final state, log every task that then did not run as
    "NotReady" and every stage it stopped (:class:`pll.utils.progress.Stopped`); a
    failure that is not a :class:`PllError` (a bug) keeps all of it.
    """

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (PllError, Stopped)):
            return False
        message = record.getMessage()
        if message.startswith("Finished in state NotReady("):
            return False
        return not (message.startswith("Finished in state Failed(") and
                    any(f"{name}: " in message for name in _error_names(PllError) | _error_names(Stopped)))


def _error_names(cls):
    """The names of ``cls`` and of all its subclasses."""
    return {cls.__name__}.union(*(_error_names(sub) for sub in cls.__subclasses__()))


def _quiet_input_errors():
    hide = _OneLineInputErrors()
    for name in ("prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine", "prefect.task_engine"):
        logging.getLogger(name).addFilter(hide)


def _json_arg(text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _number_or_none(text):
    """A number, or ``none`` for an option that is off (its range is the library's to check)."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or 'none': {text!r}") from None


def _conformal_argument(parser, what):
    parser.add_argument("--conformal-alpha", type=_number_or_none, default=catalog.DEFAULT_CONFORMAL_ALPHA, metavar="ALPHA",
                        help=f"{what} conformal prediction sets that hold the true label with probability "
                        f">= 1 - ALPHA, calibrated on the validation hold-out's bags; 'none' for no sets "
                        f"(default: {catalog.DEFAULT_CONFORMAL_ALPHA})")


def _mat_variables(text):
    from pll.data.mat import parse_mat_variables

    try:
        return parse_mat_variables(text)
    except PllError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _comma_list(text):
    """Comma-separated names, stripped (the names are the library's to check)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _choices(names):
    """Help text listing ``names`` (a catalog: name -> one line) as ``name: what it is``, escaped for argparse."""
    return "; ".join(f"{name}: {text}" for name, text in names.items()).replace("%", "%%")


_DASK_HELP = "run the tasks on Dask: 'local' (a LocalCluster) or a scheduler address, e.g. tcp://127.0.0.1:8786"


_TRACKING_HELP = ("MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db); one that holds a "
                  "password only through $MLFLOW_TRACKING_URI")


def _add_data_arguments(parser):
    """The data set and its partial labels, as the pipeline and the training flow take them."""
    parser.add_argument("--dataset", default=catalog.DEFAULT_DATASET,
                        help=f"built-in name or path (default: {catalog.DEFAULT_DATASET}; see `pll datasets`)")
    parser.add_argument("--protocol", default=catalog.DEFAULT_PROTOCOL, choices=catalog.PROTOCOLS,
                        help=f"data preparation: {_choices(catalog.PROTOCOLS)} (default: {catalog.DEFAULT_PROTOCOL})")
    parser.add_argument("--noisy-bags", action="store_true",
                        help="accept empty bags and true labels outside their bags (noisy partial labels)")
    parser.add_argument("--noise", default=catalog.DEFAULT_NOISE, choices=catalog.NOISE_CHOICES, metavar="NOISE",
                        help="partial-label noise added to the bags: auto (class_dependent for fully labelled "
                        f"data, else none), none (bags as loaded), {_choices(catalog.NOISE_MODELS)} "
                        f"(default: {catalog.DEFAULT_NOISE})")
    parser.add_argument("--noise-params", type=_json_arg, default=None,
                        help='JSON parameters of the noise model, e.g. \'{"p": 0.5}\'')
    parser.add_argument("--preset", default=None, choices=catalog.PRESETS, metavar="PRESET",
                        help=f"noise parameters that --noise-params leaves out, from a reading of the DST-PLL "
                        f"paper's protocol: {_choices(catalog.PRESETS)} (default: none)")
    parser.add_argument("--mat-variables", type=_mat_variables, default=None, metavar="KEY=NAME,...",
                        help="a .mat file's variables by other names than PALM's, e.g. "
                        "features=features,partial_labels=p_labels,labels=logitlabels (keys left out: the default "
                        "names are searched)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the noise model, the split and the methods: 0 to 2**32 - 1 (default: 0)")


def _add_knn_arguments(parser):
    """The kNN backend of every neighbor search of a run: the methods', the features' and the trust score's."""
    parser.add_argument("--knn", "--knn-backend", default=DEFAULT_BACKEND, choices=BACKENDS, metavar="BACKEND",
                        help=f"kNN backend: {_choices({name: b.summary for name, b in BACKENDS.items()})} "
                        f"(default: {DEFAULT_BACKEND})")
    parser.add_argument("--knn-options", type=_json_arg, default=None,
                        help='JSON options of the kNN backend, e.g. \'{"n_trees": 32}\' for nndescent')


# Commands that run flows, and so need a Prefect API.
_ORCHESTRATED = ("run", "benchmark", "train", "score", "audit")
_SERVER_EPILOG = (
    f"Without PREFECT_API_URL, pll starts a temporary Prefect server and waits up to {STARTUP_TIMEOUT_SECONDS} s "
    "for it (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS sets another limit); with PREFECT_API_URL it uses "
    "that server."
)


def _command(sub, name, text):
    """A subcommand whose own --help describes it as ``pll --help`` lists it."""
    epilog = _SERVER_EPILOG if name in _ORCHESTRATED else None
    return sub.add_parser(name, help=text, description=text, epilog=epilog)


def _features_argument(parser):
    parser.add_argument("--features", default=catalog.DEFAULT_FEATURES, metavar="FEATURES",
                        help=f"feature pipeline: {_choices(catalog.FEATURE_PIPELINES)}; parameters in parentheses, "
                        f"e.g. 'pl_aknn_real(density_k=100)' (default: {catalog.DEFAULT_FEATURES})")


def _experiment_argument(parser):
    parser.add_argument("--experiment", default=catalog.DEFAULT_EXPERIMENT,
                        help=f"MLflow experiment name (default: {catalog.DEFAULT_EXPERIMENT})")


def build_parser():
    parser = argparse.ArgumentParser(prog="pll", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = _command(sub, "run", "run the pipeline once and log it to MLflow")
    _add_data_arguments(run)
    run.add_argument("--methods", type=_comma_list, default=list(catalog.DEFAULT_METHODS),
                     help=f"comma-separated methods among: {_choices(catalog.METHODS)} "
                     f"(default: {','.join(catalog.DEFAULT_METHODS)})")
    run.add_argument("--method-params", type=_json_arg, default=None,
                     help='JSON per method, e.g. \'{"pl_knn": {"n_neighbors": 5}}\'')
    _features_argument(run)
    run.add_argument("--method-features", type=_json_arg, default=None,
                     help=f"JSON method -> feature pipeline (default: '{json.dumps(dict(catalog.DEFAULT_METHOD_FEATURES))}')")
    _add_knn_arguments(run)
    run.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    _experiment_argument(run)
    _conformal_argument(run, "also evaluate, as a third reject option,")
    run.add_argument("--dask-address", default=None, help=_DASK_HELP)
    run.add_argument("--stage-tasks", choices=("auto", "yes", "no"), default="auto",
                     help="a Prefect task per stage (each cached; method runs in parallel), or the whole protocol as "
                     f"one task; auto: per stage from {catalog.STAGE_TASKS_MIN_ROWS:,} rows (default: auto)")
    bench = _command(sub, "benchmark", "run every cell of a benchmark grid (a YAML file; see pll/experiment/grid.py)")
    bench.add_argument("grid", help="the grid file, e.g. benchmarks/grids/smoke.yaml")
    bench.add_argument("--dask-address", default=None, help=_DASK_HELP)
    bench.add_argument("--max-concurrency", type=int, default=None, help="cells at once (default: the grid's)")
    bench.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    bench.add_argument("--experiment", default=None, help="MLflow experiment name (default: the grid's)")
    bench.add_argument("--preset", default=None, choices=catalog.PRESETS, metavar="PRESET",
                       help=f"overrides the grid's preset: {_choices(catalog.PRESETS)}")
    _command(sub, "serve", "serve deployments/prefect.yaml with its schedules (needs a Prefect server)")
    _command(sub, "datasets", "list the built-in data sets, file formats, noise models and feature pipelines")
    train = _command(sub, "train", "fit a method on all rows of a data set; log it as an MLflow model")
    _add_data_arguments(train)
    train.add_argument("--method", default=catalog.DEFAULT_METHOD, choices=catalog.METHODS, metavar="METHOD",
                       help=f"method to fit: {_choices(catalog.METHODS)} (default: {catalog.DEFAULT_METHOD})")
    train.add_argument("--method-params", type=_json_arg, default=None, help='JSON, e.g. \'{"n_neighbors": 5}\'')
    _features_argument(train)
    _add_knn_arguments(train)
    train.add_argument("--threshold", type=float, default=None,
                       help="accept rows whose score exceeds this (default: the method's own reject rule)")
    train.add_argument("--reject-lambda", type=float, default=None, metavar="LAMBDA",
                       help="choose the threshold that minimises R_LAMBDA on a 20%% hold-out: with true labels "
                       "where the data has them, else from the bags alone (the upper bound of R_LAMBDA)")
    _conformal_argument(train, "add to the model's output (set, set_size)")
    train.add_argument("--register", default=None, metavar="NAME", help="also register the model under NAME")
    train.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    _experiment_argument(train)
    score = _command(sub, "score", "score a CSV/Parquet file with a logged model; write a review queue")
    score.add_argument("--model", required=True, help="MLflow model URI (models:/..., runs:/...)")
    score.add_argument("--input", required=True, help="CSV or Parquet file: feature columns, optional candidates")
    score.add_argument("--output", required=True, help="scored rows (.parquet); <stem>.review.parquet goes beside it")
    score.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    _experiment_argument(score)
    report = _command(sub, "report", "write the papers' tables beside this project's, from benchmark grid runs")
    report.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="MLflow experiments (all their grid runs, e.g. pll-paper-dst-pll) or grid run ids")
    report.add_argument("--output", default="docs/results.md", help="the page to write (default: docs/results.md)")
    report.add_argument("--preset", default=None, choices=catalog.PRESETS, metavar="PRESET",
                        help="the reading of the protocol whose risk aggregation and t-test the tables use "
                        f"(default: the grids' own, else paper_text): {_choices(catalog.PRESETS)}")
    report.add_argument("--risk-aggregation", default=None, choices=catalog.RISK_AGGREGATIONS, metavar="HOW",
                        help=f"overrides the preset's: {_choices(catalog.RISK_AGGREGATIONS)}")
    report.add_argument("--ttest", default=None, choices=catalog.TTESTS, metavar="KIND",
                        help=f"overrides the preset's: {_choices(catalog.TTESTS)}")
    report.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    audit = _command(sub, "audit", "rank a data set's training bags by how strongly their neighbors contradict them")
    _add_data_arguments(audit)
    _features_argument(audit)
    audit.add_argument("--n-neighbors", type=int, default=10,
                       help="the other rows that judge each bag (default: 10)")
    _add_knn_arguments(audit)
    audit.add_argument("--output", default="audit.parquet",
                       help="the ranked table (.parquet), most suspicious bag first (default: audit.parquet)")
    audit.add_argument("--tracking-uri", default=None, help=_TRACKING_HELP)
    _experiment_argument(audit)
    ui.add_arguments(_command(sub, "ui", "open the MLflow UI on the method runs, ready to compare (Ctrl-C stops it)"))
    cache = _command(sub, "cache", "show the stage cache's size, and prune it (least recently used entries first)")
    cache.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                       help="delete the entries no run has written or read for DAYS days")
    cache.add_argument("--max-gb", type=float, default=None, metavar="GB",
                       help="then delete the least recently used entries until the rest fit in GB gigabytes")
    return parser


def cmd_cache(args):
    from pll_pipeline.cache.policy import RESULT_STORE
    from pll_pipeline.cache.store import entries, prune

    for name in ("older_than", "max_gb"):
        if getattr(args, name) is not None and not getattr(args, name) >= 0:
            raise PllError(f"--{name.replace('_', '-')} must be a non-negative number, got {getattr(args, name)}")
    folder = Path(RESULT_STORE.basepath).absolute()
    if args.older_than is not None or args.max_gb is not None:
        max_bytes = None if args.max_gb is None else int(args.max_gb * 1e9)
        removed = prune(folder, older_than_days=args.older_than, max_bytes=max_bytes)
        print(f"Deleted {len(removed)} entries, {sum(e.size for e in removed) / 1e9:.2f} GB")
    found = entries(folder)
    size = sum(e.size for e in found) / 1e9
    last = f"; least recently used {time.strftime('%Y-%m-%d %H:%M', time.localtime(found[0].used))}" if found else ""
    print(f"Stage cache {folder}: {len(found)} entries, {size:.2f} GB{last}")
    return 0


def cmd_serve(args):
    from .serve import serve_all

    serve_all()
    return 0


def preflight(args):
    """Refuse bad arguments and bad input before Prefect or MLflow start: one line, nothing created or left running.

    The checks are the flow's own (:mod:`pll_pipeline.flows.checks`), which it runs again
    when a deployment starts it; the preset is the flow's to apply.  Then the
    data (or the table to score) is read and checked as the flow would
    (:func:`pll_pipeline.flows.checks.content`): a bad cell is refused at once, not after
    the temporary server's start.
    """
    from pll_pipeline.tracking.store import handed_on, resolve_tracking_uri

    from .checks import COMMANDS, content

    if args.command in COMMANDS:
        COMMANDS[args.command](vars(args))
        content(vars(args))
    # A password in --tracking-uri is refused; one in MLFLOW_TRACKING_URI stays there (the flows read it).
    args.tracking_uri = handed_on(resolve_tracking_uri(args.tracking_uri))


def cmd_run(args):
    from pll.reporting.tables import markdown_table

    from .cluster import dask_cluster, on_dask
    from .pipeline import pipeline

    with dask_cluster(args.dask_address) as address:
        result = on_dask(pipeline, address)(
            dask_address=address,
            dataset=args.dataset,
            mat_variables=args.mat_variables,
            protocol=args.protocol,
            noisy_bags=args.noisy_bags,
            noise=args.noise,
            noise_params=args.noise_params,
            preset=args.preset,
            seed=args.seed,
            methods=args.methods,
            method_params=args.method_params,
            features=args.features,
            method_features=args.method_features,
            knn=args.knn,
            knn_options=args.knn_options,
            conformal_alpha=args.conformal_alpha,
            tracking_uri=args.tracking_uri,
            experiment=args.experiment,
            stage_tasks={"auto": None, "yes": True, "no": False}[args.stage_tasks],
        )
    table = result["metrics"]
    columns = ["method", "reject", "accuracy", "rejection_rate", "covered_accuracy", "risk_0.00", "risk_0.10", "risk_0.20",
               "coverage", "mean_set_size"]
    print()
    print(f"Labels: {result['labels']}")
    print(_correct_means(result["truth"]))
    print(markdown_table(table[[c for c in columns if c in table.columns]]))
    print(f"MLflow experiment: {result['experiment']}   pipeline run: {result['run_id']}   "
          f"method runs: {len(result['method_run_ids'])} (its children)")
    print(f"Tracking store:    {ui.shown(result['tracking_uri'])}")
    return 0, f"Open the UI with:  {ui.ui_hint(result['tracking_uri'], run_id=result['run_id'])}"


def _correct_means(truth):
    """The table's header line: what counts as a correct prediction, in plain words."""
    from pll.experiment import TRUE_LABELS

    if truth == TRUE_LABELS:
        return "A prediction counts as correct when it is the row's true label (test rows):"
    return ("The data has no true labels: a prediction counts as correct when it is in the row's candidate bag "
            "(test rows; rows with empty bags left out):")


def cmd_benchmark(args):
    from pll.evaluation import MIN_PAIRS
    from pll.reporting.grids import summary_tables
    from pll.reporting.tables import markdown_table

    from .benchmark import benchmark

    state = benchmark(
        grid=args.grid,
        dask_address=args.dask_address,
        max_concurrency=args.max_concurrency,
        preset=args.preset,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
        return_state=True,
    )
    result = state.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        raise result
    tables = summary_tables(result["summary"])
    for metric in ("accuracy", "risk_0.10"):
        if f"table_{metric}" in tables:
            print(f"\n{metric}: mean (± std) over seeds; bold: best, and those a paired t-test over "
                  f"{MIN_PAIRS} or more seeds does not find significantly worse")
            print(markdown_table(tables[f"table_{metric}"]))
    for failure in result["failures"]:
        print(f"FAILED cell {failure['cell']} ({failure['label']}): {failure['error']}")
    print(f"Cells: {result['finished']} of {result['cells']} finished, {len(result['failures'])} failed")
    print(f"MLflow experiment: {result['experiment']}   parent run: {result['parent_run_id']}")
    return 1 if state.is_failed() else 0, f"Open the UI with:  {ui.ui_hint(result['tracking_uri'], experiment=result['experiment'])}"


def cmd_datasets(args):
    from pll.data import BUILTIN_NAMES, FILE_FORMATS, PROTOCOLS
    from pll.preprocessing import FEATURE_PIPELINES
    from pll.noise import NOISE_MODELS

    print("Built-in data sets (fully labelled; partial labels from a noise model):")
    for name in BUILTIN_NAMES:
        print(f"  {name}")
    print("Files (pass a path to --dataset):")
    for suffix, description in FILE_FORMATS.items():
        print(f"  {suffix:<9} {description}")
    print(f"Protocols (--protocol): {', '.join(PROTOCOLS)}")
    print(f"Noise models (--noise): auto, none, {', '.join(NOISE_MODELS)}")
    print(f"Feature pipelines (--features): {', '.join(FEATURE_PIPELINES)}")
    return 0


def cmd_report(args):
    from .report import report

    written = report(args.sources, args.output, tracking_uri=args.tracking_uri, preset=args.preset,
                     risk_aggregation=args.risk_aggregation, ttest=args.ttest)
    options = written["options"]
    print(f"Wrote {written['output']} from {written['grid_runs']} grid run(s), {written['rows']} rows (preset "
          f"{options.preset}, risks {options.risk_aggregation}, t-tests {options.ttest})")
    return 0


def cmd_train(args):
    from .train import train

    result = train(
        dataset=args.dataset,
        mat_variables=args.mat_variables,
        protocol=args.protocol,
        noisy_bags=args.noisy_bags,
        method=args.method,
        method_params=args.method_params,
        features=args.features,
        knn=args.knn,
        knn_options=args.knn_options,
        noise=args.noise,
        noise_params=args.noise_params,
        preset=args.preset,
        seed=args.seed,
        threshold=args.threshold,
        reject_lambda=args.reject_lambda,
        conformal_alpha=args.conformal_alpha,
        registered_name=args.register,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
    )
    print(f"MLflow experiment: {result['experiment']}   run: {result['run_id']}")
    print(f"Tracking store:    {ui.shown(result['tracking_uri'])}")
    if "registered_uri" in result:
        print(f"Registered as:     {result['registered_uri']}")
    print(result["model_uri"])
    return 0


def cmd_score(args):
    from .score import score_one

    result = score_one(
        model_uri=args.model,
        input=args.input,
        output=args.output,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
    )
    print(f"Scored {result['rows']} rows: {result['accepted']} accepted, {result['rejected']} rejected")
    print(f"Scored rows:  {result['output']}")
    print(f"Review queue: {result['review']}")
    print(f"MLflow run:   {result['run_id']}")
    return 0


def cmd_audit(args):
    from pll.reporting.tables import markdown_table

    from .audit import audit

    result = audit(dataset=args.dataset, output=args.output, mat_variables=args.mat_variables, protocol=args.protocol,
                   noisy_bags=args.noisy_bags, noise=args.noise, noise_params=args.noise_params, preset=args.preset,
                   seed=args.seed,
                   features=args.features, n_neighbors=args.n_neighbors, knn=args.knn,
                   knn_options=args.knn_options, tracking_uri=args.tracking_uri, experiment=args.experiment)
    table, metrics = result["table"], result["metrics"]
    print("The most suspicious non-empty bags:")
    print(markdown_table(table[~table["empty_bag"]].head(10)[["row", "bag", "suggested", "suspicion", "reason"]]))
    print(f"Audited {int(metrics['rows'])} bags ({int(metrics['empty_bags'])} empty, ranked first)")
    if "auc" in metrics:
        print(f"Against the true labels: {int(metrics['wrong_bags'])} bags miss theirs (base rate "
              f"{metrics['base_rate']:.3f}); AUC {metrics['auc']:.3f}, precision of the top 5 % "
              f"{metrics['precision_top_0.05']:.3f}, of the top 10 % {metrics['precision_top_0.10']:.3f}")
    print(f"Ranked table: {result['output']}")
    print(f"MLflow run:   {result['run_id']}")
    return 0, f"Open the UI with:  {ui.ui_hint(result['tracking_uri'], run_id=result['run_id'])}"


def main(argv=None):
    return_freed_memory()
    args = build_parser().parse_args(argv)
    stopping = None  # from preflight on: the first SIGTERM/SIGINT (flows.tracked.interruptible)
    try:
        with ExitStack() as stack:
            if args.command in _ORCHESTRATED:
                preflight(args)
                from .tracked import interruptible

                stopping = stack.enter_context(interruptible(args.command))
                _quiet_input_errors()
                log = stack.enter_context(temporary_server())
                if log is not None:
                    print(f"Prefect: temporary local server (its log: {log})")
            outcome = {"run": cmd_run, "serve": cmd_serve, "datasets": cmd_datasets, "train": cmd_train,
                       "score": cmd_score, "benchmark": cmd_benchmark, "audit": cmd_audit,
                       "report": cmd_report, "ui": ui.main, "cache": cmd_cache}[args.command](args)
        # A command to type next (the UI's) is the very last line: printed once the temporary server has stopped.
        status, last = outcome if isinstance(outcome, tuple) else (outcome, None)
        if last:
            print(last, flush=True)
        return status
    except PllError as exc:
        print(f"pll: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if stopping is not None:
            stopping.leave(stopping.signum or signal.SIGINT)
        print(f"pll: interrupted (Ctrl-C): {args.command} stopped; its MLflow runs are marked KILLED", file=sys.stderr)
        return 128 + signal.SIGINT
    except TemporaryServerError as exc:
        print(f"pll: error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if stopping is not None and stopping.signum is not None:  # SIGTERM as Prefect raises it, or a stage it stopped
            stopping.leave(stopping.signum)
        if type(exc).__name__ != "TerminationSignal":  # Prefect's SIGTERM, imported only with Prefect
            raise
        print(f"pll: terminated (SIGTERM): {args.command} stopped; its MLflow runs are marked KILLED", file=sys.stderr)
        return 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main())
