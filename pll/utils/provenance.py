"""What produced a result: the code's commit and the versions of the packages that shape it.

Run provenance (MLflow tags) and the stage cache's key read the same
answer, so a cached result is never served to code that would compute it
differently.
"""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

KEY_PACKAGES = ("pll-reject", "numpy", "scipy", "scikit-learn", "pynndescent", "dask", "prefect", "mlflow")


def git_commit() -> str:
    """The commit of the code that ran (``unknown`` outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def package_versions() -> dict:
    """Version of each of :data:`KEY_PACKAGES` (``absent`` when not installed)."""
    versions = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions
