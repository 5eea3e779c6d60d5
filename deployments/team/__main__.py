"""``python -m pll_pipeline.deployments.team start|stop|env FOLDER``: the team's servers in one folder."""

from __future__ import annotations

import argparse
import sys

from pll.errors import PllError

from .services import PASSWORD_ENV, PASSWORD_FILE_ENV, SERVICE_USER_ENV, env_lines, environment_file, Layout, start, stop


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pll_pipeline.deployments.team",
        description="PostgreSQL, an MLflow tracking server and a Prefect server on it, and Dask workers, in FOLDER, "
        "on 127.0.0.1.",
        epilog=f"The database password comes from ${PASSWORD_ENV}, else the file ${PASSWORD_FILE_ENV} names (mode "
        f"0600), else FOLDER/db-password (made at the first start). Started by root, PostgreSQL runs as "
        f"${SERVICE_USER_ENV} (default: nobody).")
    commands = parser.add_subparsers(dest="command", required=True)
    begin = commands.add_parser("start", help="start the servers; print the lines that point pll at them")
    begin.add_argument("folder", help="the team folder (created if missing)")
    begin.add_argument("--dask-workers", type=int, default=0,
                       help="also start a Dask scheduler and this many one-thread workers (default: 0, none)")
    begin.add_argument("--mlflow-workers", type=int, default=2, help="the MLflow server's worker processes (default: 2)")
    end = commands.add_parser("stop", help="stop every server of the folder")
    end.add_argument("folder")
    show = commands.add_parser("env", help="print the lines that point pll at the servers (the folder's team.env)")
    show.add_argument("folder")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "start":
            env = start(args.folder, dask_workers=args.dask_workers, mlflow_workers=args.mlflow_workers)
            print(env_lines(Layout(args.folder), env), end="")
        elif args.command == "stop":
            stopped = stop(args.folder)
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        else:
            print(environment_file(args.folder), end="")
    except PllError as exc:
        print(f"team: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
