"""Grid options and the parametrisation of cells from ``cases/*.toml``.

    pytest bench -k "llama3 and margin"            select cells by id
    pytest bench --grid tiny --full-grid           the whole tiny grid (default: its CI slice)
    pytest bench --grid paper --model qwen3-8b      one model's cells (a cluster task, a CI matrix job)
    pytest bench -n 4 --dist loadgroup             one worker per GPU, a model+objective's cells on one worker
    pytest bench --redo / --update-reference       recompute finished cells / rewrite references
    pytest bench --grid real --verify -k gemma3     replay archived cells (no model), one test per cell
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from depthprune.grid.cases import load_grids

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    group = parser.getgroup("depthprune grid")
    group.addoption("--cases", default=str(ROOT / "cases"), help="directory of grid case files (*.toml)")
    group.addoption("--grid", action="append", default=None, help="only this grid (repeatable); default all")
    group.addoption("--full-grid", action="store_true", help="run every cell, not only each grid's [ci] slice")
    group.addoption("--results", default=str(ROOT / "results"), help="results directory (resumable)")
    group.addoption("--reference-dir", default=str(ROOT / "reference"), help="reference directory")
    group.addoption("--redo", action="store_true", help="recompute cells even if a finished result exists")
    group.addoption("--update-reference", action="store_true", help="(re)write measured references from this run")
    group.addoption("--model", action="append", default=None, metavar="ID",
                    help="only this model's cells (repeatable; exact id, unlike -k: tiny-llama3 is not tiny-llama3.1)")
    group.addoption("--objective", action="append", default=None, metavar="NAME",
                    help="only this objective's cells (repeatable; exact name)")
    group.addoption("--device", default=None, help="device for cells (default: per grid; xdist worker i -> cuda:i)")
    group.addoption("--verify", action="store_true",
                    help="instead of running cells, replay the selected grids' archived cells (depthprune verify "
                    "--replay-only), one test per cell: -k, --model and --objective select")
    group.addoption("--verify-results", action="append", default=None, metavar="DIR",
                    help="with --verify: results or archives to verify (repeatable; default: archive/)")
    group.addoption("--against", default=None, choices=("float32", "bfloat16"), metavar="DTYPE",
                    help="check every cell against its reference of this dtype, whatever it runs in: across "
                    "precisions or kernels, as a numeric fork or a change (depthprune.verify.forks)")
    group.addoption("--archive", default=str(ROOT / "archive"), metavar="DIR",
                    help="archives of the runs references were made from (a fork check replays them)")
    group.addoption("--dtype", default=None, choices=("auto", "float32", "bfloat16"),
                    help="numeric precision of every cell, over the case files' (a cell then needs a reference of "
                    "that dtype: reference/<dtype>/)")
    group = parser.getgroup("depthprune rehearsal")
    group.addoption("--rehearsal", default=os.environ.get("DEPTHPRUNE_REHEARSAL"), metavar="DIR",
                    help="stand-ins built by `depthprune rehearsal build --out DIR` (env DEPTHPRUNE_REHEARSAL); "
                    "without it bench/test_rehearsal.py skips")
    group.addoption("--case-override", default=str(ROOT / "cases" / "rehearsal" / "ci.toml"), metavar="FILE",
                    help="case override applied to the rehearsed grid (default cases/rehearsal/ci.toml; its [ci] "
                    "cells are the slice run without --full-grid)")
    group.addoption("--rehearsal-results", default=str(ROOT / "results-rehearsal"), metavar="DIR",
                    help="results directory of rehearsal cells (never the real one)")


def _grids(config):
    grids = load_grids(config.getoption("--cases"))
    if config.getoption("--dtype"):
        grids = [replace(g, dtype=config.getoption("--dtype")) for g in grids]
    wanted = config.getoption("--grid")
    if wanted:
        unknown = sorted(set(wanted) - {g.name for g in grids})
        if unknown:
            raise pytest.UsageError(f"--grid {unknown[0]}: no such grid; allowed: {', '.join(g.name for g in grids)}")
        grids = [g for g in grids if g.name in wanted]
    return grids


def _selection(config, grids, option: str, field: str) -> set[str] | None:
    """The exact names ``--model``/``--objective`` select, checked against the grids' cells' ``field`` (a
    ``[[cells]]`` block may add a model or objective that the ``[grid]`` table does not name: real.toml's gemma3-270m)."""
    wanted = config.getoption(option)
    if not wanted:
        return None
    _refuse_unknown(option, wanted, {getattr(cell, field) for g in grids for cell in g.cells()},
                    "not in the selected grids")
    return set(wanted)


def _refuse_unknown(option: str, wanted, allowed, why: str) -> None:
    """A usage error for the first of ``wanted`` not in ``allowed``: a typo would otherwise select nothing and pass."""
    unknown = [w for w in wanted or () if w not in allowed]
    if unknown:
        raise pytest.UsageError(f"{option} {unknown[0]}: {why}; allowed: {', '.join(sorted(allowed))}")


def _rehearsal_cells(metafunc) -> None:
    """Parametrise ``rehearsal_cell``: the cells of the overridden grid (its [ci] slice unless --full-grid)."""
    from depthprune.grid.cases import apply_override, load_grid, tomllib

    config = metafunc.config
    override = Path(config.getoption("--case-override"))
    name = tomllib.loads(override.read_text()).get("override", {}).get("grid", "paper")
    grid = apply_override(load_grid(Path(config.getoption("--cases")) / f"{name}.toml"), override)
    params = []
    for cell in grid.cells():
        marks = [pytest.mark.xdist_group(f"rehearsal/{cell.group}")]
        if cell.id not in (grid.ci_cells or ()):
            marks.append(pytest.mark.grid_extra)
        params.append(pytest.param((grid, cell), id=cell.id, marks=marks))
    metafunc.parametrize("rehearsal_cell", params)


def _verify_cells(metafunc) -> None:
    """Parametrise ``verify_cell``: the archived results of the selected grids, by cell id (with --verify)."""
    config = metafunc.config
    if not config.getoption("--verify"):
        metafunc.parametrize("verify_cell", [pytest.param(None, marks=pytest.mark.skip(reason="pass --verify"))],
                             ids=["not-asked"])
        return
    from depthprune.verify.run import SelectionError, select_cells

    results = config.getoption("--verify-results") or [str(ROOT / "archive")]
    try:
        cells = select_cells(results, config.getoption("--grid"))
    except SelectionError as err:
        raise pytest.UsageError(str(err)) from None
    models, objectives = config.getoption("--model"), config.getoption("--objective")
    for option, wanted, field in (("--model", models, "model"), ("--objective", objectives, "objective")):
        _refuse_unknown(option, wanted, {getattr(r.identity, field) for r in cells},
                        "no archived cell of the selected grids has it")
    cells = [r for r in cells if (not models or r.identity.model in models)
             and (not objectives or r.identity.objective in objectives)]
    metafunc.parametrize("verify_cell", [pytest.param(r, id=f"{r.identity.grid}-{r['cell']}") for r in cells])


def pytest_generate_tests(metafunc):
    if "rehearsal_cell" in metafunc.fixturenames:
        _rehearsal_cells(metafunc)
    if "verify_cell" in metafunc.fixturenames:
        _verify_cells(metafunc)
    if "grid_cell" not in metafunc.fixturenames:
        return
    config = metafunc.config
    if config.getoption("--verify"):  # verify archived cells instead of running any
        metafunc.parametrize("grid_cell", [pytest.param(None, marks=pytest.mark.skip(reason="--verify: cells are "
                                                                                      "replayed, not run"))],
                             ids=["not-run"])
        return
    grids = _grids(config)
    models = _selection(config, grids, "--model", "model")
    objectives = _selection(config, grids, "--objective", "objective")
    params = []
    for grid in grids:
        for cell in grid.cells():
            if (models and cell.model not in models) or (objectives and cell.objective not in objectives):
                continue
            marks = [getattr(pytest.mark, m) for m in grid.markers]
            marks.append(pytest.mark.xdist_group(cell_group(config, grid, cell)))
            if grid.ci_cells is not None and cell.id not in grid.ci_cells:
                marks.append(pytest.mark.grid_extra)
            # a slice repeats its main grid's cell ids: name the slice in its test ids, or pytest would number them
            test_id = f"{cell.id}-{grid.name}" if grid.kind == "slice" else cell.id
            params.append(pytest.param((grid, cell), id=test_id, marks=marks))
    metafunc.parametrize("grid_cell", params)


def pytest_configure(config):
    _check_xdist_groups(config)
    _share_cpu_threads()
    from depthprune.scoring.score_store import store_enabled
    from depthprune.verify.forks import across_enabled

    try:
        store_enabled()  # a bad DEPTHPRUNE_SCORE_STORE or DEPTHPRUNE_ACROSS stops the run before any model loads
        across_enabled()
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def _share_cpu_threads() -> None:
    """Under pytest-xdist, split the CPU cores between workers instead of oversubscribing
    (each torch process would otherwise start one thread per core)."""
    from depthprune.common.machine import local_workers

    workers = local_workers()
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--full-grid"):
        keep, drop = [], []
        for item in items:
            (drop if item.get_closest_marker("grid_extra") else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    _longest_groups_first(items, config, config.getoption("--cases"))


def cell_group(config, grid, cell) -> str:
    """A grid cell's xdist group. A whole grid (``--full-grid``): one group per model and objective (they share a
    calibration and a prior): 6 groups of the tiny grid keep 2 workers busy to the end, where 3 model groups left
    one idle ~9 min. The CI slices: one group per model, whatever the grid, so that one worker loads it and
    evaluates its dense model once (the runner keeps the session across grids; tiny-qwen3's ppl and margin cells,
    tiny-llama3's tiny and controls cells)."""
    if config.getoption("--full-grid"):
        return f"{grid.name}/{cell.group}"
    return f"model/{cell.model}"


def _longest_groups_first(items, config, cases_dir: str) -> None:
    """Grid cells in groups, longest group first (recorded durations: depthprune.grid.schedule),
    so that --dist loadgroup's hand-out keeps every worker busy to the end."""
    from depthprune.grid.schedule import estimate, load_durations, longest_first

    group_of, seconds_of, per_grid = {}, {}, {}
    for i, item in enumerate(items):
        spec = getattr(item, "callspec", None)
        if spec is None or not isinstance(spec.params.get("grid_cell"), tuple):  # --verify: no cell runs
            continue
        grid, cell = spec.params["grid_cell"]
        if grid.name not in per_grid:
            per_grid[grid.name] = estimate(grid.cells(), load_durations(grid.name, cases_dir))
        group_of[i], seconds_of[i] = cell_group(config, grid, cell), per_grid[grid.name][cell.id]
    if len(set(group_of.values())) > 1:
        items[:] = longest_first(items, group_of, seconds_of)


def _check_xdist_groups(config) -> None:
    """Fail loudly where ``--dist loadgroup`` would silently ignore our per-model groups.

    pytest-xdist tags grouped tests by rewriting their node ids (``...@group``); with
    pytest >= 9.2's structured node ids the rewrite no longer takes effect
    (pytest-dev/pytest-xdist#1386, unfixed in xdist 3.8.0), so every worker would load
    every model. Checked on the controller, before workers start.
    """
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    import xdist
    from packaging.version import Version

    if Version(pytest.__version__) >= Version("9.2") and Version(xdist.__version__) <= Version("3.8.0"):
        raise pytest.UsageError(
            f"--dist loadgroup is ignored with pytest {pytest.__version__} and pytest-xdist {xdist.__version__} "
            "(pytest-dev/pytest-xdist#1386): a model's cells would not stay on one worker; "
            "install 'pytest<9.2' (depthprune[test] pins it)")


def pytest_report_header(config):
    if config.getoption("--full-grid"):
        return "depthprune grid: every cell"
    return "depthprune grid: CI slice of each grid with a [ci] section (pass --full-grid for every cell)"


@pytest.fixture(scope="session")
def grid_runner(request):
    from depthprune.grid.runner import GridRunner

    device = request.config.getoption("--device")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if device is None and worker:
        import torch

        if torch.cuda.is_available():
            device = f"cuda:{int(worker.lstrip('gw')) % torch.cuda.device_count()}"
    runner = GridRunner(request.config.getoption("--results"), device=device,
                        redo=request.config.getoption("--redo"))
    yield runner
    runner.close()
