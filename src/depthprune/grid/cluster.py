"""A grid beyond one machine: one cluster task per model (or model and objective), via submitit.

    depthprune submit --grid paper --executor slurm --partition gpu --results /shared/results --wait
    depthprune report --results /shared/results --out REPORT.md

Each task runs the same command a single machine runs for a slice of the grid,

    python -m pytest bench/test_grid.py --grid paper --model llama3-8b --results DIR --full-grid

so a task's cells prune, evaluate, resume and compare with ``reference/`` exactly as they do
locally (skip reasons included), and ``depthprune report`` merges whatever the tasks wrote.
The tasks are submitted by submitit (``map_array``: one SLURM job array, one call to the
scheduler, ``slurm_array_parallelism`` caps how many run at once); its ``local`` executor runs
the same tasks as subprocesses of this machine, which is how the path is tested. A task is a
model's cells (``per="model"``, the default: one load, the dense evaluation once) or a model and
objective's (``per="objective"``: twice the tasks, each loading the model; see ``depthprune plan``
for the wall-clock of each split).

On SLURM, submitit runs each task with this process's Python interpreter, so the environment
(and the checkout: ``repo``) must be on a filesystem the compute nodes share; so must
``results`` and the submitit ``folder`` (logs, pickled tasks).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.grid.cases import Grid

EXECUTORS = ("slurm", "local", "debug")
SPLITS = ("model", "objective")


@dataclass(frozen=True)
class GridTask:
    """One cluster task: the grid cells of one model (and objective), run by pytest."""

    grid: str
    model: str
    objective: str | None  # None: every objective of the grid
    repo: str  # a checkout: bench/ is not part of the installed package
    cases: str
    results: str
    full_grid: bool = True
    keyword: str | None = None  # pytest -k on top of the model/objective selection
    extra: tuple[str, ...] = ()  # more pytest arguments (e.g. --redo, --reference-dir DIR)
    threads: int | None = None  # the task's CPUs: its torch threads (None: the suite's default)

    @property
    def name(self) -> str:
        return "/".join(x for x in (self.grid, self.model, self.objective) if x)

    def command(self) -> list[str]:
        """The pytest command line of this task (run in ``repo``)."""
        cmd = [sys.executable, "-m", "pytest", "bench/test_grid.py", "--grid", self.grid, "--model", self.model,
               "--cases", self.cases, "--results", self.results, "-p", "no:cacheprovider", "-q", "-rs",
               "--junitxml", str(self.junit_path)]
        if self.objective:
            cmd += ["--objective", self.objective]
        if self.full_grid:
            cmd.append("--full-grid")
        if self.keyword:
            cmd += ["-k", self.keyword]
        return cmd + list(self.extra)

    def environment(self, parent: dict[str, str] | None = None) -> dict[str, str]:
        """The pytest's environment: the parent's, with ``DEPTHPRUNE_THREADS`` (torch's threads in
        the suite's conftest, default 2) and ``OMP_NUM_THREADS`` = the task's CPUs unless set. Three
        local tasks on two cores otherwise ran six busy threads, 20 % of the time in the kernel."""
        env = dict(os.environ if parent is None else parent)
        if self.threads:
            env.setdefault("DEPTHPRUNE_THREADS", str(self.threads))
            env.setdefault("OMP_NUM_THREADS", str(self.threads))
        return env

    @property
    def junit_path(self) -> Path:
        return Path(self.results) / ".tasks" / f"{self.name.replace('/', '--')}.xml"


@dataclass(frozen=True)
class TaskOutcome:
    """What a task reports back: pytest's exit status and its counts (from its JUnit XML)."""

    task: str
    returncode: int
    tests: int
    failures: int
    errors: int
    skipped: int
    seconds: float
    host: str
    output_tail: str

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    @property
    def ok(self) -> bool:
        return self.returncode in (0, 5) and not self.failures and not self.errors  # 5: no cell selected


def run_task(task: GridTask) -> TaskOutcome:
    """Run one task's pytest command (what each submitit job calls)."""
    task.junit_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    proc = subprocess.run(task.command(), cwd=task.repo, env=task.environment(), capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if task.junit_path.is_file():
        root = ET.parse(task.junit_path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        for suite in suites:
            for key in counts:
                counts[key] += int(suite.get(key, 0))
    tail = (proc.stdout + proc.stderr)[-4000:]
    return TaskOutcome(task.name, proc.returncode, seconds=seconds, host=os.uname().nodename, output_tail=tail,
                       **counts)


def make_tasks(grid: Grid, repo: str | Path, results: str | Path, cases: str | Path, per: str = "model",
               models: tuple[str, ...] = (), objectives: tuple[str, ...] = (), full_grid: bool = True,
               keyword: str | None = None, extra: tuple[str, ...] = (), threads: int | None = None) -> list[GridTask]:
    """One task per model (or model and objective) of ``grid``, restricted to ``models``/``objectives``;
    ``threads``: each task's CPUs (:meth:`GridTask.environment`)."""
    if per not in SPLITS:
        raise ValueError(f"per {per!r} is not allowed; allowed: {', '.join(SPLITS)}")
    for flag, names, axis in (("model", models, grid.models), ("objective", objectives, grid.objectives)):
        unknown = [n for n in names if n not in axis]
        if unknown:
            raise ValueError(f"{flag} {unknown[0]!r} is not in grid {grid.name}; allowed: {', '.join(axis)}")
    repo = Path(repo).resolve()
    if not (repo / "bench" / "test_grid.py").is_file():
        raise ValueError(f"{repo} is not a depthprune checkout (no bench/test_grid.py); tasks run the grid's pytest "
                         "cells from a checkout on a shared filesystem")
    chosen_models = [m for m in grid.models if not models or m in models]
    chosen_objectives = [o for o in grid.objectives if not objectives or o in objectives]
    def task(model: str, objective: str | None) -> GridTask:
        return GridTask(grid=grid.name, model=model, objective=objective, repo=str(repo),
                        cases=str(Path(cases).resolve()), results=str(Path(results).resolve()), full_grid=full_grid,
                        keyword=keyword, extra=tuple(extra), threads=threads)

    if per == "model" and (not objectives or len(chosen_objectives) == len(grid.objectives)):
        return [task(m, None) for m in chosen_models]
    return [task(m, o) for m in chosen_models for o in chosen_objectives]


def submit(tasks: list[GridTask], executor: str = "slurm", folder: str | Path = "submitit",
           parameters: dict[str, Any] | None = None) -> list[Any]:
    """Submit ``tasks`` as one job array through submitit; returns its jobs (``job.result()`` waits).

    ``parameters``: submitit's (``timeout_min``, ``gpus_per_node``, ``cpus_per_task``, ``mem_gb``,
    ``slurm_partition``, ``slurm_array_parallelism``, ``slurm_additional_parameters`` ...).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not allowed; allowed: {', '.join(EXECUTORS)}")
    try:
        import submitit
    except ModuleNotFoundError as err:  # pragma: no cover - depends on the install
        raise RuntimeError("the cluster path needs submitit: pip install 'depthprune[cluster]'") from err
    if not tasks:
        return []
    ex = submitit.AutoExecutor(folder=str(folder), cluster=executor)
    ex.update_parameters(name=f"depthprune-{tasks[0].grid}", **(parameters or {}))
    return ex.map_array(run_task, tasks)


def outcome_rows(outcomes: list[TaskOutcome]) -> list[list[Any]]:
    return [[o.task, o.host, o.returncode, o.passed, o.failures + o.errors, o.skipped, f"{o.seconds:.0f}"]
            for o in outcomes]


__all__ = ["EXECUTORS", "SPLITS", "GridTask", "TaskOutcome", "make_tasks", "outcome_rows", "run_task",
           "submit"]
