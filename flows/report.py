"""``pll report``: the results page of grid runs read back from MLflow, as the papers' tables."""

from __future__ import annotations

from pathlib import Path

from pll.experiment.presets import get_preset
from pll.reporting.reproduction import ReportOptions, results_page
from pll.utils.atomic_files import write_atomically
from pll_pipeline.tracking.grid import grid_results
from pll_pipeline.tracking.runs import resolve_tracking_uri


def report(sources, output, *, tracking_uri: str | None = None, preset: str | None = None,
           risk_aggregation: str | None = None, ttest: str | None = None) -> dict:
    """Write the results page of the grid runs ``sources`` (names or run ids) to ``output``, atomically.

    ``preset`` (default: the grids' own, when they share one, else
    ``paper_text``) sets how risks aggregate and which t-test marks
    differences; ``risk_aggregation`` and ``ttest`` override it.  Returns
    ``output``, the ``options`` used, the number of ``grid_runs`` and table ``rows``.
    """
    table, found, presets = grid_results(resolve_tracking_uri(tracking_uri), sources)
    name = preset or (presets.pop() if len(presets) == 1 else "paper_text")
    defaults = get_preset(name)
    options = ReportOptions(name, risk_aggregation or defaults.risk_aggregation, ttest or defaults.ttest)
    command = " ".join(["pll report", *sources] + [f"--{k.replace('_', '-')} {v}" for k, v in (
        ("preset", preset), ("risk_aggregation", risk_aggregation), ("ttest", ttest)) if v])
    page = results_page(table, options, found, command)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_atomically({output: lambda path: path.write_text(page)})  # a reader never sees half a page
    return {"output": output, "options": options, "grid_runs": len(found), "rows": len(table)}
