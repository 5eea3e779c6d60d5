"""Start and stop a team's servers in one folder: PostgreSQL, MLflow and Prefect on it, optionally Dask.

Everything listens on 127.0.0.1 only, on ports picked free at the first start and kept in ``team.json``
(so that ``team.env`` stays right across restarts).  The folder holds::

    team.json     ports and the running servers' process ids (no secret)
    team.env      mode 0600: the lines that point pll at the servers (MLFLOW_TRACKING_URI, PREFECT_API_URL, ...)
    db-password   mode 0600: the database password, made at the first start unless the environment gives one
    postgres/     the database cluster and its log (owned by the user PostgreSQL runs as)
    artifacts/    MLflow's artifact store, served by the tracking server
    logs/         each server's log
    cache/        the stage cache the servers' Dask workers and the team's commands share

The password reaches the servers through their environment (``MLFLOW_BACKEND_STORE_URI``,
``PREFECT_SERVER_DATABASE_CONNECTION_URL``), never their command lines, which every user sees in ``ps``;
the users' URLs (``http://127.0.0.1:PORT``) hold none.  PostgreSQL refuses to run as root: started by
root, it runs as an unprivileged user (``PLL_TEAM_SERVICE_USER``, default ``nobody``) through ``runuser``,
and owns ``postgres/``; the other servers run as the user who started them.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from contextlib import suppress
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import quote

from pll.errors import PllError
from pll_pipeline.flows.processes import free_port, start_group, wait_until_healthy

PASSWORD_ENV = "PLL_TEAM_DB_PASSWORD"
"""The database password, from the environment (else the file ``PASSWORD_FILE_ENV`` names, else ``db-password``)."""
PASSWORD_FILE_ENV = "PLL_TEAM_DB_PASSWORD_FILE"
"""A file holding the database password; refused unless only its owner, this user, can read it (mode 0600)."""
SERVICE_USER_ENV = "PLL_TEAM_SERVICE_USER"
"""Whom PostgreSQL runs as when root starts it (PostgreSQL refuses root)."""
DEFAULT_SERVICE_USER = "nobody"
PG_BIN_ENV = "PLL_TEAM_PG_BIN"
"""The folder of PostgreSQL's ``initdb`` and ``pg_ctl``, where they are not on the PATH."""

DB_USER = "pll"
LOOPBACK = "127.0.0.1"
SERVICES = ("mlflow", "prefect", "dask-scheduler", "dask-workers")
"""The servers this module starts besides PostgreSQL, in the order they start; they stop in reverse."""
STARTUP_TIMEOUT_SECONDS = 300
"""How long MLflow or Prefect may take to answer: each creates its tables in a new database first."""
STOP_GRACE_SECONDS = 20
"""How long a server's process group may take to exit after SIGTERM before SIGKILL."""
MAX_CONNECTIONS = 200
"""PostgreSQL's connection limit: MLflow's and Prefect's pools for many concurrent runs (its default is 100)."""


class TeamSetupError(PllError):
    """The team's servers cannot be started or stopped as asked; the message says why and what to do."""


# --- the folder -----------------------------------------------------------------------------------------


class Layout:
    """The paths of a team folder."""

    def __init__(self, folder):
        self.folder = Path(folder).absolute()
        self.state = self.folder / "team.json"
        self.env_file = self.folder / "team.env"
        self.password_file = self.folder / "db-password"
        self.postgres = self.folder / "postgres"
        self.data = self.postgres / "data"
        self.artifacts = self.folder / "artifacts"
        self.logs = self.folder / "logs"
        self.cache = self.folder / "cache"

    def load(self) -> dict:
        try:
            return json.loads(self.state.read_text())
        except FileNotFoundError:
            return {}

    def save(self, state: dict) -> None:
        tmp = self.state.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file at ``path`` that only this user can read (mode 0600 from its creation)."""
    with suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def read_private(path: Path, what: str) -> str:
    """The text of ``path``, refused unless this user owns it and no one else may read or write it."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise TeamSetupError(f"{what} {path} does not exist") from None
    if info.st_uid != os.geteuid():
        raise TeamSetupError(f"{what} {path} belongs to another user (uid {info.st_uid}); use a file of your own, mode 0600")
    if info.st_mode & 0o077:
        raise TeamSetupError(f"{what} {path} may be read by others (mode {stat.S_IMODE(info.st_mode):04o}); "
                             f"chmod 600 {shlex.quote(str(path))}")
    return path.read_text()


def db_password(layout: Layout, create: bool) -> str:
    """The database password: ``PLL_TEAM_DB_PASSWORD``, else the file ``PLL_TEAM_DB_PASSWORD_FILE``, else ``db-password``.

    The last is made with a random password at the first start (``create``).
    """
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    named = os.environ.get(PASSWORD_FILE_ENV)
    path = Path(named) if named else layout.password_file
    if not named and create and not path.exists():
        write_private(path, secrets.token_urlsafe(24) + "\n")
    password = read_private(path, f"the password file ({PASSWORD_FILE_ENV})" if named else "the password file")
    password = password.rstrip("\n")
    if not password:
        raise TeamSetupError(f"the password file {path} is empty")
    return password


# --- who runs PostgreSQL, and where its binaries are ------------------------------------------------------


def postgres_binaries() -> tuple[str, str]:
    """The paths of ``initdb`` and ``pg_ctl``; :class:`TeamSetupError` naming what is missing."""
    folder = os.environ.get(PG_BIN_ENV)
    found = [shutil.which(name, path=folder) for name in ("initdb", "pg_ctl")]
    if None in found:
        where = f"in {PG_BIN_ENV}={folder}" if folder else "on the PATH"
        raise TeamSetupError(f"PostgreSQL's initdb and pg_ctl are not {where}: install PostgreSQL (15 or later) "
                             f"or set {PG_BIN_ENV} to the folder that holds them")
    return found[0], found[1]


def service_user() -> pwd.struct_passwd | None:
    """The user PostgreSQL runs as when root starts it (:data:`SERVICE_USER_ENV`); None for anyone else."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(SERVICE_USER_ENV) or DEFAULT_SERVICE_USER
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise TeamSetupError(f"{SERVICE_USER_ENV}={name}: no such user; name an unprivileged user "
                             "for PostgreSQL, which refuses to run as root") from None
    if user.pw_uid == 0:
        raise TeamSetupError(f"{SERVICE_USER_ENV}={name} is root; PostgreSQL refuses to run as root: name another user")
    if shutil.which("runuser") is None:
        raise TeamSetupError("runuser (util-linux) is not on the PATH; root starts PostgreSQL as another user with it")
    return user


def as_service(command: list[str], user) -> list[str]:
    """``command`` as the service user runs it (unchanged when ``user`` is None)."""
    return ["runuser", "-u", user.pw_name, "--", *command] if user else command


def check_reachable(folder: Path, user) -> None:
    """Refuse a folder the service user cannot reach: each folder above it must let that user pass (``x``)."""
    for above in [folder, *folder.parents]:
        info = above.stat()
        if info.st_uid == user.pw_uid:
            bit = stat.S_IXUSR
        elif info.st_gid == user.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            raise TeamSetupError(
                f"PostgreSQL runs as {user.pw_name} (root starts it so), who cannot reach {folder}: {above} has mode "
                f"{stat.S_IMODE(info.st_mode):04o}; choose a folder whose parents others may pass (chmod o+x {above})")


# --- PostgreSQL -----------------------------------------------------------------------------------------


def _run(command, what, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kwargs)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TeamSetupError(f"{what} failed (status {result.returncode}): {last[0]}")
    return result


def init_postgres(layout: Layout, password: str, user, port: int) -> None:
    """A new database cluster in ``postgres/data``: superuser ``pll`` with ``password``, loopback TCP only."""
    initdb, _ = postgres_binaries()
    layout.postgres.mkdir(mode=0o700, exist_ok=True)
    if user:
        os.chown(layout.postgres, user.pw_uid, user.pw_gid)
    # initdb reads the password from a file (never its command line); the service user must be able to read it.
    pwfile = layout.postgres / "initdb-password"
    write_private(pwfile, password + "\n")
    try:
        if user:
            os.chown(pwfile, user.pw_uid, user.pw_gid)
        _run(as_service([initdb, "-D", str(layout.data), "-U", DB_USER, f"--pwfile={pwfile}", "--auth=scram-sha-256",
                         "--encoding=UTF8", "--no-instructions"], user), "initdb", cwd=layout.postgres)
    finally:
        pwfile.unlink()
    with open(layout.data / "postgresql.conf", "a") as conf:
        conf.write(f"\n# pll team setup: loopback TCP only, no Unix socket\nlisten_addresses = '{LOOPBACK}'\n"
                   f"port = {port}\nunix_socket_directories = ''\nmax_connections = {MAX_CONNECTIONS}\n")


def pg_ctl(layout: Layout, user, *args: str, what: str):
    _, binary = postgres_binaries()
    return _run(as_service([binary, "-D", str(layout.data), *args], user), what, cwd=layout.postgres)


def postgres_running(layout: Layout) -> bool:
    return (layout.data / "postmaster.pid").exists()


def create_databases(port: int, password: str, names=("mlflow", "prefect")) -> None:
    """Create the databases of MLflow and Prefect, unless they exist."""
    import psycopg

    try:
        with psycopg.connect(host=LOOPBACK, port=port, user=DB_USER, password=password, dbname="postgres",
                             autocommit=True, connect_timeout=30) as conn:
            for name in names:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                    conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0]
        raise TeamSetupError(f"PostgreSQL on {LOOPBACK}:{port} refused user {DB_USER}: {first} (is the password the one "
                             "the database was made with?)") from None


def database_url(driver: str, password: str, port: int, database: str) -> str:
    """A SQLAlchemy URL of the team's database ``database``; it holds the password: for a server's environment only."""
    return f"{driver}://{DB_USER}:{quote(password, safe='')}@{LOOPBACK}:{port}/{database}"


# --- the servers ----------------------------------------------------------------------------------------


def _wait_for_port(process, port, what, log_path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TeamSetupError(f"{what} exited with status {process.returncode} (its log: {log_path})")
        with suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=2):
            return
        time.sleep(0.5)
    raise TeamSetupError(f"{what} did not listen on {LOOPBACK}:{port} within {timeout:.0f} s (its log: {log_path})")


def _record(layout: Layout, state: dict, name: str, process: subprocess.Popen) -> None:
    import psutil

    state.setdefault("services", {})[name] = {"pid": process.pid, "started": psutil.Process(process.pid).create_time()}
    layout.save(state)


def user_environment(layout: Layout, ports: dict, dask: bool) -> dict:
    """What the team's commands and Dask workers need in their environment; no secret."""
    env = {"MLFLOW_TRACKING_URI": f"http://{LOOPBACK}:{ports['mlflow']}",
           "PREFECT_API_URL": f"http://{LOOPBACK}:{ports['prefect']}/api",
           "PLL_CACHE_DIR": str(layout.cache)}
    if dask:
        env["PLL_TEAM_DASK_ADDRESS"] = f"tcp://{LOOPBACK}:{ports['dask-scheduler']}"
    return env


def env_lines(layout: Layout, env: dict) -> str:
    lines = [f"# pll's team servers in {layout.folder}: source this file, or export these lines",
             *(f"export {name}={shlex.quote(value)}" for name, value in env.items())]
    return "\n".join(lines) + "\n"


def start(folder, *, dask_workers: int = 0, mlflow_workers: int = 2) -> dict:
    """Start PostgreSQL, MLflow, Prefect and (``dask_workers`` > 0) a Dask scheduler and workers in ``folder``.

    Returns the users' environment (:func:`user_environment`), also written to ``team.env`` (mode 0600).
    Anything started is stopped again if a later server fails to start.
    """
    if dask_workers < 0 or mlflow_workers < 1:
        raise TeamSetupError("--dask-workers must be 0 or more, --mlflow-workers 1 or more")
    layout = Layout(folder)
    postgres_binaries()
    if find_spec("psycopg") is None:
        raise TeamSetupError("MLflow's PostgreSQL driver is missing: pip install 'pll-reject[pipeline,team]'")
    user = service_user()
    if not layout.folder.exists():
        layout.folder.mkdir(parents=True, mode=0o711 if user else 0o700)
    if user:
        check_reachable(layout.folder, user)
    state = layout.load()
    running = [name for name, proc in state.get("services", {}).items() if _alive(proc)]
    if running or postgres_running(layout):
        raise TeamSetupError(f"the team servers in {layout.folder} run already ({', '.join(running) or 'postgres'}); "
                             "stop them first")
    password = db_password(layout, create=True)
    ports = state.setdefault("ports", {})
    for name in ("postgres", *SERVICES[:3]):
        ports.setdefault(name, free_port())
    state["services"] = {}
    state["service_user"] = user.pw_name if user else None  # stop runs pg_ctl as the same user
    layout.save(state)
    for path in (layout.artifacts, layout.logs, layout.cache):
        path.mkdir(mode=0o700, exist_ok=True)
    if not (layout.data / "PG_VERSION").exists():
        init_postgres(layout, password, user, ports["postgres"])
    try:
        pg_ctl(layout, user, "-l", str(layout.postgres / "postgres.log"), "-w", "-t", "120", "start",
               what="PostgreSQL's start (pg_ctl)")
        create_databases(ports["postgres"], password)
        env = _start_servers(layout, state, password, dask_workers, mlflow_workers)
    except BaseException:
        stop(layout.folder)
        raise
    write_private(layout.env_file, env_lines(layout, env))
    return env


def _start_servers(layout, state, password, dask_workers, mlflow_workers):
    ports = state["ports"]
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("MLFLOW_", "PREFECT_API_DATABASE", "PREFECT_SERVER_DATABASE"))}
    mlflow_env = {**base, "MLFLOW_BACKEND_STORE_URI": database_url("postgresql+psycopg", password, ports["postgres"], "mlflow"),
                  "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow = start_group([sys.executable, "-m", "mlflow", "server", "--host", LOOPBACK, "--port", str(ports["mlflow"]),
                          "--workers", str(mlflow_workers), "--artifacts-destination", layout.artifacts.as_uri()],
                         str(layout.logs / "mlflow.log"), mlflow_env)
    _record(layout, state, "mlflow", mlflow)
    api_url = f"http://{LOOPBACK}:{ports['prefect']}/api"
    prefect_env = {**base, "PREFECT_SERVER_DATABASE_CONNECTION_URL":
                   database_url("postgresql+asyncpg", password, ports["postgres"], "prefect"),
                   "PREFECT_API_URL": api_url, "PREFECT_HOME": str(layout.folder / "prefect-home"),
                   "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    prefect = start_group([sys.executable, "-m", "prefect", "server", "start", "--host", LOOPBACK,
                           "--port", str(ports["prefect"])], str(layout.logs / "prefect.log"), prefect_env)
    _record(layout, state, "prefect", prefect)
    # Both create their tables at once; each is waited for after both have started.
    wait_until_healthy(mlflow, f"http://{LOOPBACK}:{ports['mlflow']}/health", "the MLflow server",
                       str(layout.logs / "mlflow.log"), STARTUP_TIMEOUT_SECONDS)
    wait_until_healthy(prefect, f"{api_url}/health", "the Prefect server", str(layout.logs / "prefect.log"),
                       STARTUP_TIMEOUT_SECONDS)
    env = user_environment(layout, ports, dask=dask_workers > 0)
    if dask_workers:
        _start_dask(layout, state, {**base, **env}, dask_workers)
    return env


def _start_dask(layout, state, env, workers):
    """A Dask scheduler and ``workers`` single-threaded workers, in the folder, with the users' environment."""
    port = state["ports"]["dask-scheduler"]
    address = env["PLL_TEAM_DASK_ADDRESS"]
    log = str(layout.logs / "dask-scheduler.log")
    scheduler = start_group([sys.executable, "-m", "dask", "scheduler", "--host", LOOPBACK, "--port", str(port),
                             "--dashboard-address", f"{LOOPBACK}:0"], log, env)
    _record(layout, state, "dask-scheduler", scheduler)
    _wait_for_port(scheduler, port, "the Dask scheduler", log)
    workers_process = start_group([sys.executable, "-m", "dask", "worker", address, "--host", LOOPBACK,
                                   "--dashboard-address", f"{LOOPBACK}:0", "--nworkers", str(workers),
                                   "--nthreads", "1"], str(layout.logs / "dask-workers.log"), env)
    _record(layout, state, "dask-workers", workers_process)
    from distributed import Client

    with Client(address, set_as_default=False, timeout=60) as client:
        client.wait_for_workers(workers, timeout=120)


# --- stopping -------------------------------------------------------------------------------------------


def _alive(recorded: dict) -> bool:
    """True while the process recorded (its id and start time: never a later process given the same id) runs."""
    import psutil

    try:
        proc = psutil.Process(recorded["pid"])
        return (abs(proc.create_time() - recorded["started"]) < 1e-3 and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _group(pgid: int) -> list:
    """The running processes of process group ``pgid``."""
    import psutil

    members = []
    for proc in psutil.process_iter(["status"]):
        with suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
    return members


def _stop_group(recorded: dict) -> None:
    """SIGTERM to the recorded server's process group, SIGKILL to what is left after :data:`STOP_GRACE_SECONDS`."""
    import psutil

    pgid = recorded["pid"]
    with suppress(psutil.NoSuchProcess):
        if abs(psutil.Process(pgid).create_time() - recorded["started"]) >= 1e-3:
            return  # the id is another process's now: ours is long gone, with its group
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, 10)):
        with suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + grace
        while _group(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _group(pgid):
            return


def stop(folder) -> list[str]:
    """Stop every server of the team folder (Dask, Prefect, MLflow, then PostgreSQL); the names of those stopped."""
    layout = Layout(folder)
    if not layout.state.exists():
        raise TeamSetupError(f"{layout.folder} holds no team setup (no team.json)")
    state = layout.load()
    services = state.get("services", {})
    stopped = []
    for name in reversed(SERVICES):
        if name in services:
            if _alive(services[name]):
                stopped.append(name)
            _stop_group(services[name])
            del services[name]
            layout.save(state)
    if postgres_running(layout):
        user = pwd.getpwnam(state["service_user"]) if state.get("service_user") else None
        pg_ctl(layout, user, "-w", "-t", "60", "-m", "fast", "stop", what="PostgreSQL's stop (pg_ctl)")
        stopped.append("postgres")
    return stopped


def environment_file(folder) -> str:
    """The text of the folder's ``team.env``."""
    layout = Layout(folder)
    return read_private(layout.env_file, "the environment file")
