"""The repository's folders and file names: one place that says where a checkout keeps what.

Every CLI default and every reader of these folders takes its name from here, relative to the working
directory (a command run at the repository's root finds them; ``--cases``, ``--results``, ... move them).
"""

from __future__ import annotations

from pathlib import Path

#: the grids' case files (``<grid>.toml``), and their recorded cell durations under :data:`DURATIONS`
CASES = "cases"
DURATIONS = "durations"
#: a grid run's results (``<grid>/<cell>.json``, ``<grid>/dense/<model>.json``, ``eval-cache/``)
RESULTS = "results"
#: the grids' stored references (``<dtype>/<cell>.json``)
REFERENCE = "reference"
#: the committed results a clean clone re-judges: one ``<grid>`` + :data:`ARCHIVE_SUFFIX` per grid, and rivals
ARCHIVE = "archive"
ARCHIVE_SUFFIX = ".jsonl.xz"
#: the report, its per-grid pages and its figures (beside the report)
REPORT = "REPORT.md"
REPORTS = "reports"
FIGURES = "figures"
RIVALS_GLOB = "rivals-*.json"


def rivals_file(archive_dir: str | Path, grid: str) -> Path:
    """Where a grid's rivals live beside its archive."""
    return Path(archive_dir) / f"rivals-{grid}.json"


def durations_file(cases_dir: str | Path, grid: str) -> Path:
    """A grid's recorded cell durations (``depthprune durations`` writes them; the grid's scheduler reads them)."""
    return Path(cases_dir) / DURATIONS / f"{grid}.json"
