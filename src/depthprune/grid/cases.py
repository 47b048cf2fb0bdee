"""Grid definitions: ``cases/*.toml`` -> validated :class:`Grid` -> :class:`Cell` list.

A case file names the axes (models × objectives × searchers × budgets × seeds) and the
settings shared by its cells. It is validated on load, and a bad file fails with the
file, the field and what is allowed — a typo must never silently shrink a grid. ::

    [grid]
    name = "tiny"
    models = ["tiny-llama3", "tiny-qwen3"]
    objectives = ["ppl", "margin"]
    searchers = ["oneshot", "greedy"]
    budgets = [3, 5]
    seeds = [0]
    markers = ["tiny"]          # pytest markers for every cell (gpu, slow, tiny)
    device = "cpu"              # "cuda" cells skip where no GPU is present
    dtype = "float32"
    batch_size = 8

    [objective.ppl]             # objective parameters (sizes, datasets, seeds)
    n_samples = 32

    [searcher.ga]               # searcher hyper-parameters
    max_evaluations = 120

    [evaluation]                # depthprune.data.protocol.EvalConfig fields
    seq_len = 256

    [tolerance]                 # how closely a cell must match its reference
    calibration_loss_rel = 1e-4

    [ci]
    cells = ["tiny-llama3-ppl-greedy-M3"]   # the slice CI runs (others need --full-grid); [] runs none,
                                            # no [ci] section every cell

    [[cells]]                   # more cells: axes default to [grid]'s (a control's variations)
    searchers = ["ga", "bo"]
    variant = "uniform"         # named in the cell id: tiny-llama3-ppl-ga.uniform-M3
    search_params = { prior = "uniform" }       # over [searcher.*]
    # or several named variants in one block: variants = { r01 = { q = 0.04 }, r02 = { q = 0.08 } }
    objective_params = {}                       # over [objective.*]
    lane = "panel"              # optional: these cells form their own xdist group, which another worker may
                                # take (it then repeats the dense pass and the prior; results are the same)
    # group = "a"               # or, instead of lane: the xdist group by name within the model, shared by
                                # every block that names it whatever its objective: one worker per group,
                                # so a run's split between workers is fixed by hand (real.toml's gemma3-270m)
    calibration_seeds = [1, 2]  # more calibration samples (ids -c1, -c2); stochastic searchers'
                                # seed follows the calibration seed (ids -s1 -c1)

A grid of ``kind = "controls"`` varies a main grid (``compare_with``): the reporter puts
its cells in the control sections, never in the main tables or the claim verdicts.

A grid of ``kind = "slice"`` is a cheaper measurement of some cells of a main grid
(``compare_with``), e.g. evaluated on fewer items so that CI can afford it: its references
are its own (``reference/<grid name>/<dtype>/``, made at its own settings, as its cell ids
repeat the main grid's) and the reporter leaves it out of every table and verdict.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from depthprune.data.profiles import Profile, get_profile
from depthprune.data.protocol import EvalConfig
from depthprune.model.registry import MODELS

MARKERS = ("gpu", "slow", "tiny")


class CaseFileError(ValueError):
    """A case file is malformed; the message names file, field and what is allowed."""


@dataclass(frozen=True)
class Tolerance:
    """How far a result may be from its reference and still pass."""

    calibration_loss_rel: float = 1e-4  # relative, for the calibration loss
    calibration_loss_abs: float = 1e-6
    accuracy_abs: float = 0.02  # acc / acc_norm / avg_acc, absolute
    perplexity_rel: float = 0.01  # *_ppl, relative
    near_tie_rel: float = 1e-3  # a different removed set passes if its loss is this close
    #: calibration loss, relative, when a bf16 result ran on other matmul kernels or another thread
    #: count than its reference (bf16 without AMX against AMX references: measured 5.5e-4 on smollm2
    #: ppl oneshot M7, 1.8e-3 on tiny-qwen3 margin cbo M3; 2 threads against 1: 2.1e-4 on smollm2),
    #: same removed sets, metrics within tolerance (DESIGN.md)
    other_kernels_loss_rel: float = 2e-3


@dataclass(frozen=True)
class Cell:
    """One benchmark case: a model pruned by a searcher under an objective.

    ``seed`` is the searcher's; ``calibration_seed`` (None: the case file's objective seed)
    picks the calibration sample; ``variant`` names a searcher-parameter variant. The id
    names every axis that differs from its default, so ``-k`` selects by any of them.
    """

    grid: str
    model: str
    objective: str
    search: str
    budget: int
    seed: int = 0
    calibration_seed: int | None = None
    variant: str = "default"
    #: the variant's parameters over the case file's [searcher.*] / [objective.*] (sorted items)
    search_params: tuple[tuple[str, Any], ...] = ()
    objective_params: tuple[tuple[str, Any], ...] = ()
    lane: str = ""  # a [[cells]] block's own xdist group within its model and objective (e.g. an alignment panel)
    named_group: str = ""  # a [[cells]] block's ``group``: its xdist group within the model, across objectives

    @property
    def id(self) -> str:
        variant = f".{self.variant}" if self.variant != "default" else ""
        suffix = f"-s{self.seed}" if self.seed else ""
        calib = f"-c{self.calibration_seed}" if self.calibration_seed is not None else ""
        return f"{self.model}-{self.objective}-{self.search}{variant}-M{self.budget}{suffix}{calib}"

    @property
    def group(self) -> str:
        """Cells of one group share a loaded model, calibration data and prior."""
        if self.named_group:
            return f"{self.model}/{self.named_group}"
        data = f".{self.variant}" if self.objective_params else ""
        calib = f"/c{self.calibration_seed}" if self.calibration_seed is not None else ""
        lane = f"/{self.lane}" if self.lane else ""
        return f"{self.model}/{self.objective}{data}{calib}{lane}"


@dataclass(frozen=True)
class Grid:
    name: str
    path: Path
    models: tuple[str, ...]
    objectives: tuple[str, ...]
    searchers: tuple[str, ...]
    budgets: tuple[int, ...]
    seeds: tuple[int, ...] = (0,)
    markers: tuple[str, ...] = ()
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 8
    description: str = ""
    objective_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    searcher_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    tolerance: Tolerance = Tolerance()
    ci_cells: tuple[str, ...] | None = None  # None: no [ci] section, CI runs every cell; () : CI runs none
    kind: str = "main"  # "controls": varies the main grid ``compare_with``, reported apart; "slice": never reported
    compare_with: str | None = None
    blocks: tuple[dict[str, Any], ...] = ()  # the [[cells]] tables, validated
    override: Path | None = None  # a case override applied on top of ``path`` (apply_override)
    #: the [heal] table: the HealConfig fields its heals use (``depthprune heal-grid --cases``; empty: none named)
    heal: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        cells = [
            Cell(self.name, m, o, s, b, seed)
            for m in self.models
            for o in self.objectives
            for s in self.searchers
            for b in self.budgets
            for seed in self.seeds
        ]
        for block in self.blocks:
            cells += _block_cells(self, block)
        return cells

    def search_params(self, cell: Cell) -> dict[str, Any]:
        """The searcher's parameters in ``cell``: the case file's [searcher.*] with the cell's variant over it."""
        return {**self.searcher_params.get(cell.search, {}), **dict(cell.search_params)}

    def reference_dir(self, root: str | Path) -> Path:
        """Where this grid's references are: ``root``, or ``root/<name>`` for a slice (its ids repeat its main grid's)."""
        return Path(root) / self.name if self.kind == "slice" else Path(root)

    def eval_config(self, profile: str | Profile) -> EvalConfig:
        return get_profile(profile).eval_config(**self.evaluation)

    def cell(self, cell_id: str) -> Cell:
        """The cell with this id; the error lists a few ids that are there."""
        for c in self.cells():
            if c.id == cell_id:
                return c
        ids = [c.id for c in self.cells()]
        raise KeyError(f"{self.path}: no cell {cell_id!r}; e.g. {', '.join(ids[:3])} ({len(ids)} cells)")


def _block_cells(grid: Grid, block: dict[str, Any]) -> list[Cell]:
    from depthprune.search import SEARCHERS

    out = []
    variants = block.get("variants") or {block.get("variant", "default"): block.get("search_params", {})}
    op = tuple(sorted(block.get("objective_params", {}).items()))
    for m in block.get("models", grid.models):
        for o in block.get("objectives", grid.objectives):
            for s in block.get("searchers", grid.searchers):
                for b in block.get("budgets", grid.budgets):
                    for cseed in block.get("calibration_seeds", [None]):
                        seeds = [cseed] if cseed is not None and SEARCHERS[s].stochastic else grid.seeds
                        for seed in seeds:
                            for variant, params in variants.items():
                                out.append(Cell(grid.name, m, o, s, b, seed, cseed, variant,
                                                tuple(sorted(params.items())), op, block.get("lane", ""),
                                                block.get("group", "")))
    return out


_BLOCK_KEYS = {"models": list, "objectives": list, "searchers": list, "budgets": list, "variant": str,
               "search_params": dict, "variants": dict, "objective_params": dict, "calibration_seeds": list, "description": str,
               "lane": str, "group": str}
_GRID_KEYS = {"name": str, "kind": str, "compare_with": str, "description": str, "models": list, "objectives": list,
              "searchers": list, "budgets": list, "seeds": list, "markers": list, "device": str, "dtype": str,
              "batch_size": int}
_REQUIRED = ("name", "models", "objectives", "searchers", "budgets")
KINDS = ("main", "controls", "slice")
_SECTIONS = ("grid", "objective", "searcher", "evaluation", "tolerance", "ci", "cells", "heal")


def _fail(path: Path, where: str, message: str) -> CaseFileError:
    return CaseFileError(f"{path}: {where}: {message}")


def _check_params(path: Path, section: str, name: str, params: Any, allowed: set[str]) -> dict[str, Any]:
    where = f"[{section}.{name}]" if name else f"[{section}]"
    if not isinstance(params, dict):
        raise _fail(path, where, "must be a table of parameters")
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise _fail(path, f"{where} {unknown[0]}", f"unknown parameter; allowed: {', '.join(sorted(allowed))}")
    return dict(params)


def _read_toml(path: Path, what: str = "case file") -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise CaseFileError(f"{path}: no such {what}") from None
    except tomllib.TOMLDecodeError as err:
        raise CaseFileError(f"{path}: not valid TOML: {err}") from None


def load_grid(path: str | Path) -> Grid:
    """Read and validate one case file."""
    path = Path(path)
    return _grid_from_raw(path, _read_toml(path))


def _grid_from_raw(path: Path, raw: dict[str, Any]) -> Grid:
    from depthprune.objectives import OBJECTIVES
    from depthprune.search import SEARCHERS

    for section in raw:
        if section not in _SECTIONS:
            raise _fail(path, f"[{section}]", f"unknown section; allowed: {', '.join(_SECTIONS)}")
    g = raw.get("grid")
    if not isinstance(g, dict):
        raise _fail(path, "[grid]", "missing; it names the grid's axes")
    for key, value in g.items():
        if key not in _GRID_KEYS:
            raise _fail(path, f"[grid] {key}", f"unknown field; allowed: {', '.join(_GRID_KEYS)}")
        if not isinstance(value, _GRID_KEYS[key]) or isinstance(value, bool):
            raise _fail(path, f"[grid] {key}", f"must be a {_GRID_KEYS[key].__name__}, got {value!r}")
    for key in _REQUIRED:
        if key not in g or (isinstance(g[key], list) and not g[key]):
            raise _fail(path, f"[grid] {key}", "required and must not be empty")

    def names(key: str, allowed: set[str] | tuple[str, ...]) -> tuple[str, ...]:
        values = g.get(key, [])
        for v in values:
            if v not in allowed:
                raise _fail(path, f"[grid] {key}", f"{v!r} is not allowed; allowed: {', '.join(sorted(allowed))}")
        if len(set(values)) != len(values):
            raise _fail(path, f"[grid] {key}", "has duplicates")
        return tuple(values)

    models = names("models", set(MODELS))
    objectives = names("objectives", set(OBJECTIVES))
    searchers = names("searchers", set(SEARCHERS))
    markers = names("markers", MARKERS)
    for key in ("budgets", "seeds"):
        for v in g.get(key, []):
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if key == "budgets" else 0):
                raise _fail(path, f"[grid] {key}", f"{v!r} is not allowed; allowed: integers >= {1 if key == 'budgets' else 0}")
    for m in models:
        n = MODELS[m].n_layers
        if n is not None and max(g["budgets"]) >= n:
            raise _fail(path, "[grid] budgets", f"{max(g['budgets'])} is not allowed for {m} ({n} layers)")
    if g.get("device", "auto") not in ("auto", "cpu", "cuda"):
        raise _fail(path, "[grid] device", f"{g['device']!r} is not allowed; allowed: auto, cpu, cuda")

    objective_params = {}
    for name, params in raw.get("objective", {}).items():
        if name not in OBJECTIVES:
            raise _fail(path, f"[objective.{name}]", f"unknown objective; allowed: {', '.join(sorted(OBJECTIVES))}")
        allowed = {f.name for f in fields(OBJECTIVES[name]) if not f.name.startswith("_")}
        objective_params[name] = _check_params(path, "objective", name, params, allowed)
    searcher_params = {}
    for name, params in raw.get("searcher", {}).items():
        if name not in SEARCHERS:
            raise _fail(path, f"[searcher.{name}]", f"unknown searcher; allowed: {', '.join(sorted(SEARCHERS))}")
        allowed = {f.name for f in fields(SEARCHERS[name])} - {"progress"}
        searcher_params[name] = _check_params(path, "searcher", name, params, allowed)
    evaluation = _check_params(path, "evaluation", "", raw.get("evaluation", {}),
                               {f.name for f in fields(EvalConfig)})
    if "tasks" in evaluation:
        evaluation["tasks"] = tuple(evaluation["tasks"])
    try:  # valid for the profile of every model of the grid (its tasks, its fields)
        for profile in sorted({MODELS[m].profile for m in models} or {"paper"}):
            get_profile(profile).eval_config(**evaluation)
    except (TypeError, ValueError) as err:
        raise _fail(path, "[evaluation]", str(err)) from None
    tol_raw = _check_params(path, "tolerance", "", raw.get("tolerance", {}), {f.name for f in fields(Tolerance)})
    for key, value in tol_raw.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise _fail(path, f"[tolerance] {key}", f"must be a number >= 0, got {value!r}")
    grid = Grid(
        name=g["name"], path=path, models=models, objectives=objectives, searchers=searchers,
        budgets=tuple(g["budgets"]), seeds=tuple(g.get("seeds", [0])), markers=markers,
        device=g.get("device", "auto"), dtype=g.get("dtype", "auto"), batch_size=g.get("batch_size", 8),
        description=g.get("description", ""), objective_params=objective_params,
        searcher_params=searcher_params, evaluation=evaluation, tolerance=Tolerance(**tol_raw),
    )
    if g.get("kind", "main") not in KINDS:
        raise _fail(path, "[grid] kind", f"{g['kind']!r} is not allowed; allowed: {', '.join(KINDS)}")
    if g.get("kind") in ("controls", "slice") and not g.get("compare_with"):
        raise _fail(path, "[grid] compare_with", f"required for kind = \"{g['kind']}\": the main grid it "
                                                 + ("varies" if g["kind"] == "controls" else "slices"))
    blocks = _check_blocks(path, raw.get("cells", []), g, objective_params, searcher_params)
    grid = Grid(**{**grid.__dict__, "kind": g.get("kind", "main"), "compare_with": g.get("compare_with"),
                   "blocks": blocks})
    grid = Grid(**{**grid.__dict__, "heal": _check_heal(path, raw.get("heal"))})
    ci = _check_params(path, "ci", "", raw.get("ci", {}), {"cells"})
    ids = [c.id for c in grid.cells()]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise _fail(path, "[[cells]]", f"cell {dupes[0]!r} is defined twice; give the block its own variant name")
    for cid in ci.get("cells", []):
        if cid not in ids:
            raise _fail(path, "[ci] cells", f"{cid!r} is not a cell of this grid")
    return Grid(**{**grid.__dict__, "ci_cells": tuple(ci["cells"]) if "cells" in ci else None})


def _check_heal(path: Path, raw: Any) -> dict[str, Any]:
    """The [heal] table: HealConfig's fields (tokens required), each value in its range."""
    if raw is None:
        return {}
    from depthprune.healing.config import HealConfig

    params = _check_params(path, "heal", "", raw, set(HealConfig.__dataclass_fields__))
    if "tokens" not in params:
        raise _fail(path, "[heal] tokens", "required: the token budget every heal of the grid uses")
    try:
        HealConfig.from_dict(params)
    except (TypeError, ValueError) as err:
        raise _fail(path, "[heal]", str(err)) from None
    return params


def _check_blocks(path: Path, raw: Any, g: dict[str, Any], objective_params: dict[str, dict[str, Any]],
                  searcher_params: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The [[cells]] tables: known keys, allowed names, parameters the searcher/objective has."""
    from depthprune.objectives import OBJECTIVES
    from depthprune.search import SEARCHERS

    if not isinstance(raw, list):
        raise _fail(path, "[[cells]]", "must be an array of tables ([[cells]])")
    allowed_names = {"models": set(MODELS), "objectives": set(OBJECTIVES), "searchers": set(SEARCHERS)}
    blocks = []
    for n, block in enumerate(raw, 1):
        where = f"[[cells]] #{n}"
        if not isinstance(block, dict):
            raise _fail(path, where, "must be a table")
        for key, value in block.items():
            if key not in _BLOCK_KEYS:
                raise _fail(path, f"{where} {key}", f"unknown field; allowed: {', '.join(_BLOCK_KEYS)}")
            if not isinstance(value, _BLOCK_KEYS[key]) or isinstance(value, bool):
                raise _fail(path, f"{where} {key}", f"must be a {_BLOCK_KEYS[key].__name__}, got {value!r}")
        for key, names in allowed_names.items():
            for v in block.get(key, []):
                if v not in names:
                    raise _fail(path, f"{where} {key}", f"{v!r} is not allowed; allowed: {', '.join(sorted(names))}")
        for key in ("budgets", "calibration_seeds"):
            low = 1 if key == "budgets" else 0
            for v in block.get(key, []):
                if not isinstance(v, int) or isinstance(v, bool) or v < low:
                    raise _fail(path, f"{where} {key}", f"{v!r} is not allowed; allowed: integers >= {low}")
        if "lane" in block and "group" in block:
            raise _fail(path, f"{where} group", "give either lane (a group of its own within its model and objective) "
                        "or group (a group by name within the model), not both")
        if "group" in block and not block["group"].replace("_", "").replace("-", "").isalnum():
            raise _fail(path, f"{where} group", f"{block['group']!r} is not allowed; allowed: letters, digits, _ and -")
        if "variants" in block and ("variant" in block or "search_params" in block):
            raise _fail(path, f"{where} variants", "give either variants (name -> search_params, several) or "
                        "variant + search_params (one), not both")
        variants = block.get("variants") or {block.get("variant", "default"): block.get("search_params", {})}
        for variant, params in variants.items():
            key = "variants" if "variants" in block else "variant"
            if not variant.replace("_", "").isalnum() or (variant == "default" and (params
                                                                                    or block.get("objective_params"))):
                raise _fail(path, f"{where} {key}", f"{variant!r}: a block that changes parameters needs a name of "
                            "letters, digits and _ (it goes into the cell id), not 'default'")
            if not isinstance(params, dict):
                raise _fail(path, f"{where} variants.{variant}", f"must be a table of search_params, got {params!r}")
            for s in block.get("searchers", g.get("searchers", [])):
                allowed = {f.name for f in fields(SEARCHERS[s])} - {"progress"}
                what = f"variants.{variant}" if "variants" in block else "search_params"
                _check_params(path, "cells", f"#{n} {what} (searcher {s})", params, allowed)
        for o in block.get("objectives", g.get("objectives", [])):
            allowed = {f.name for f in fields(OBJECTIVES[o]) if not f.name.startswith("_")}
            _check_params(path, "cells", f"#{n} objective_params (objective {o})",
                          block.get("objective_params", {}), allowed)
        blocks.append(dict(block))
    return tuple(blocks)

#: what a case override may change in ``[grid]``: where and how cells run, never the axes
OVERRIDE_GRID_KEYS = ("device", "dtype", "batch_size")


def apply_override(grid: Grid, override: str | Path) -> Grid:
    """``grid`` with a case override applied: a TOML file that names the grid it changes and
    replaces parameters, never axes, so its cells are the grid's cells.

        [override]
        grid = "paper"            # must be grid.name
        [grid]
        device = "cpu"            # only device, dtype, batch_size
        [objective.ppl]           # merged key by key into the grid's tables
        n_samples = 4
        [evaluation]
        limit = 8
        [ci]
        cells = [...]             # replaces the grid's CI slice

    Validated exactly as a case file (the merged tables go through :func:`load_grid`'s checks).
    Used by rehearsals (``cases/rehearsal/``), which shrink sizes and run a GPU grid on a CPU.
    """
    path = Path(override)
    raw = _read_toml(path, "case override")
    head = raw.pop("override", None)
    if not isinstance(head, dict) or head.get("grid") != grid.name:
        raise _fail(path, "[override] grid", f"must name the grid it overrides ({grid.name!r}), "
                                             f"got {None if not isinstance(head, dict) else head.get('grid')!r}")
    unknown = sorted(set(head) - {"grid", "description"})
    if unknown:
        raise _fail(path, f"[override] {unknown[0]}", "unknown field; allowed: grid, description")
    for key in raw.get("grid", {}):
        if key not in OVERRIDE_GRID_KEYS:
            raise _fail(path, f"[grid] {key}", f"an override may not change it; allowed: {', '.join(OVERRIDE_GRID_KEYS)}")
    merged = _read_toml(grid.path)
    for section, table in raw.items():
        if section not in _SECTIONS:
            raise _fail(path, f"[{section}]", f"unknown section; allowed: override, {', '.join(_SECTIONS)}")
        if not isinstance(table, dict):
            raise _fail(path, f"[{section}]", "must be a table")
        if section == "ci":
            merged["ci"] = dict(table)
        elif section in ("objective", "searcher"):
            for name, params in table.items():
                if not isinstance(params, dict):
                    raise _fail(path, f"[{section}.{name}]", "must be a table of parameters")
                merged.setdefault(section, {}).setdefault(name, {}).update(params)
        else:
            merged.setdefault(section, {}).update(table)
    try:
        out = _grid_from_raw(grid.path, merged)
    except CaseFileError as err:
        raise CaseFileError(f"{path} applied to {err}") from None
    label = head.get("description") or path.stem
    return Grid(**{**out.__dict__, "override": path, "description": f"{out.description} [override: {label}]"})


def load_grids(directory: str | Path) -> list[Grid]:
    """Every ``*.toml`` in ``directory``, sorted by name; grid names must be unique."""
    grids = [load_grid(p) for p in sorted(Path(directory).glob("*.toml"))]
    seen: dict[str, Path] = {}
    for grid in grids:
        if grid.name in seen:
            raise CaseFileError(f"{grid.path}: [grid] name: {grid.name!r} is already used by {seen[grid.name]}")
        seen[grid.name] = grid.path
    return grids
