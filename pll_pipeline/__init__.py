"""The pipeline around the library: Prefect flows and tasks, MLflow tracking, the signed stage cache.

Its layers live at the repository's top level (``flows/``, ``tasks/``, ``tracking/``, ``cache/``,
``deployments/``), as the design shows them; the wheel, and an editable install alike, map each into
this package (``pyproject.toml``'s ``package-dir``), so that an installed project owns no generic
top-level name.

It needs the ``pipeline`` extra: without it, importing any of its modules fails in one line
that names the extra.
"""

from importlib.util import find_spec

from pll.errors import MissingExtraError

EXTRA = "pipeline"
REQUIRES = ("prefect", "prefect_dask", "distributed", "mlflow")

_missing = [name for name in REQUIRES if find_spec(name) is None]
if _missing:
    raise MissingExtraError(
        f"pll_pipeline needs the '{EXTRA}' extra: pip install 'pll-reject[{EXTRA}]' (missing: {', '.join(_missing)})"
    )
