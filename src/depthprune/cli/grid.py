"""``depthprune plan`` and ``submit``: a grid's cost before it runs, and running it as a cluster job array."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from depthprune.cli.common import check_destination, fraction, load_grid, positive
from depthprune.cli.errors import EXIT_FAILURE
from depthprune.common import layout
from depthprune.common.errors import InputError


def cmd_plan(args: argparse.Namespace) -> int:
    from depthprune.common.jsonio import write_json_atomic
    from depthprune.plan import GPUS, Assumptions, ThroughputError, format_plan, load_throughput, plan_grid

    if args.grid is None and not args.check:
        raise InputError("--grid is required (or --check DIR to re-count measured results)")
    if args.gpu not in GPUS:
        raise InputError(f"--gpu {args.gpu!r} is unknown; allowed: {', '.join(GPUS)}")
    for d in [*(args.measured or []), *(args.check or [])]:
        if not Path(d).is_dir():
            raise InputError(f"--measured/--check {d}: not a directory of results")
    check_destination(args.json, "--json")
    try:
        throughput = None if args.throughput is None else load_throughput(args.throughput)
    except ThroughputError as err:
        raise InputError(f"--throughput {err}") from None
    status = 0
    if args.check:
        status = _check_plan(args.check)
    if args.grid is None:
        return status
    grid = load_grid(args.cases, args.grid)
    dtype_bytes = 4 if grid.dtype == "float32" else 2
    assumptions = Assumptions(gpu=args.gpu, gpus=args.gpus, mfu=args.mfu, landscapes=args.landscapes,
                              margin_tokens_per_item=args.margin_tokens, dtype_bytes=dtype_bytes,
                              measured=tuple(args.measured or ()), heal_tokens=args.heal_tokens)
    plan = plan_grid(grid, assumptions, throughput)
    print(format_plan(plan))
    if args.json:
        write_json_atomic(args.json, plan.to_dict())
        print(f"wrote {args.json}")
    return status


def _check_plan(dirs: list[str]) -> int:
    """Re-count each result of ``dirs`` from its recorded losses; 1 if any reproducible count differs."""
    from depthprune.common.text_tables import markdown_table
    from depthprune.plan import NotRecorded, check_result
    from depthprune.results.store import iter_results
    from depthprune.search import SEARCHERS

    rows, bad = [], 0
    results = [r for stand_in in (False, True) for r in iter_results(dirs, stand_in=stand_in)]
    for r in results:
        search = r.identity.search
        why = SEARCHERS[search].not_recountable if search in SEARCHERS else ""
        if why:
            rows.append([r["cell"], search, r["cost"]["evaluations"], r["cost"]["layer_forwards"], "-", "-",
                         f"not re-counted: {why}"])
            continue
        try:
            sim, run = check_result(r)
        except NotRecorded as err:
            bad += 1
            rows.append([r["cell"], search, r["cost"]["evaluations"], r["cost"]["layer_forwards"], "-", "-",
                         f"MISMATCH: the re-run left the recorded path ({err.args[0]})"])
            continue
        same = (sim.evaluations, sim.layer_forwards, sim.layer_backwards) == (
            run["evaluations"], run["layer_forwards"], run["layer_backwards"])
        bad += not same
        rows.append([r["cell"], search, run["evaluations"], run["layer_forwards"], sim.evaluations,
                     sim.layer_forwards, "equal" if same else "MISMATCH"])
    print(markdown_table(rows, ["cell", "search", "run evals", "run layer-fwd", "plan evals", "plan layer-fwd",
                                  "check"]))
    print(f"checked {len(results)} results: {bad} mismatch(es)")
    return EXIT_FAILURE if bad else 0


def task_threads(executor: str, cpus_per_task: int, n_tasks: int) -> int:
    """Each task's torch threads: its CPUs; with the local executors, whose tasks all run at once on
    this machine, at most this machine's cores shared among them."""
    if executor == "slurm":
        return cpus_per_task
    return max(1, min(cpus_per_task, (os.cpu_count() or 1) // max(1, n_tasks)))


def cmd_submit(args: argparse.Namespace) -> int:
    from depthprune.common.text_tables import markdown_table
    from depthprune.grid.cluster import make_tasks, outcome_rows, submit

    grid = load_grid(args.cases, args.grid)
    extra = list(args.pytest_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    check_destination(args.results, "--results", kind="dir")
    check_destination(args.report, "--report")
    if args.report and not args.wait:
        raise InputError("--report needs --wait (the report merges the tasks' results once they are done)")
    try:
        tasks = make_tasks(grid, args.repo, args.results, args.cases, per=args.per, models=tuple(args.model or ()),
                           objectives=tuple(args.objective or ()), full_grid=not args.ci_slice, keyword=args.k,
                           extra=tuple(extra))
    except ValueError as err:
        raise InputError(f"--model/--objective/--repo: {err}") from None
    threads = task_threads(args.executor, args.cpus_per_task, len(tasks))
    tasks = [dataclasses.replace(t, threads=threads) for t in tasks]
    parameters: dict[str, Any] = {"timeout_min": args.timeout_min, "gpus_per_node": args.gpus_per_task,
                                  "cpus_per_task": args.cpus_per_task}
    if args.mem_gb is not None:
        parameters["mem_gb"] = args.mem_gb
    if args.partition:
        parameters["slurm_partition"] = args.partition
    if args.array_parallelism:
        parameters["slurm_array_parallelism"] = args.array_parallelism
    folder = args.folder or str(Path(args.results) / ".submitit")
    jobs = submit(tasks, args.executor, folder, parameters)
    for task, job in zip(tasks, jobs):
        print(f"submitted  {task.name} as job {job.job_id} ({args.executor})")
    print(f"logs       {folder}")
    if not args.wait:
        print(f"then       depthprune report --results {args.results} --out REPORT.md")
        return 0
    outcomes = [job.result() for job in jobs]
    print(markdown_table(outcome_rows(outcomes), ["task", "host", "exit", "passed", "failed", "skipped", "s"]))
    for o in outcomes:
        if not o.ok:
            print(f"--- {o.task} (exit {o.returncode}) ---\n{o.output_tail}", file=sys.stderr)
    if args.report:
        from depthprune.report import write_report

        out = write_report([args.results], args.report, None,
                           command=f"depthprune report --results {args.results} --out {args.report}")
        print(f"wrote      {out}")
    return 0 if all(o.ok for o in outcomes) else EXIT_FAILURE


def register(sub: Any) -> None:
    """Add ``plan`` and ``submit`` to the ``depthprune`` subparsers ``sub``."""
    from depthprune.plan import GPUS

    p = sub.add_parser("plan", help="expected layer-forwards, FLOPs, GPU-hours and memory of a grid, before it runs")
    p.add_argument("--grid", default=None, help="grid name (a case file's [grid] name, e.g. paper)")
    p.add_argument("--cases", default=layout.CASES, help="directory of case files (default: ./cases)")
    p.add_argument("--gpu", default="h100-80gb", help=f"GPU kind ({', '.join(GPUS)}; default h100-80gb)")
    p.add_argument("--gpus", type=positive(1), default=8, help="GPUs available, one worker each (default 8)")
    p.add_argument("--mfu", type=fraction, default=0.35, help="assumed model-FLOPs utilisation (default 0.35, ours)")
    p.add_argument("--heal-tokens", type=positive(1), default=19_000_000,
                   help="a heal's training tokens, for the healing GPU-hours (default 19 M: the peers' 2 epochs of "
                        "Alpaca-cleaned)")
    p.add_argument("--landscapes", type=positive(1), default=4,
                   help="synthetic loss landscapes each searcher is simulated on (default 4)")
    p.add_argument("--margin-tokens", type=positive(1), default=160,
                   help="assumed padded tokens per margin item (default 160, a guess)")
    p.add_argument("--measured", action="append", metavar="DIR",
                   help="results (e.g. a rehearsal's): measured counts beside the plan, bo's prefix-cache ratio")
    p.add_argument("--check", action="append", metavar="DIR",
                   help="re-count every result in DIR from its recorded losses; exit 1 on a mismatch")
    p.add_argument("--throughput", default=None, metavar="FILE",
                   help="a throughput.json of depthprune measure device: measured rates instead of --mfu")
    p.add_argument("--json", default=None, metavar="FILE", help="write the plan as JSON")
    p.set_defaults(func=cmd_plan)

    from depthprune.grid.cluster import EXECUTORS, SPLITS

    p = sub.add_parser("submit", help="run a grid as a cluster job array (SLURM, via submitit), one task per model")
    p.add_argument("--grid", required=True, help="grid name (a case file's [grid] name, e.g. paper)")
    p.add_argument("--cases", default=layout.CASES, help="directory of case files (default: ./cases)")
    p.add_argument("--results", default=layout.RESULTS, help="results directory on a shared filesystem (default: ./results)")
    p.add_argument("--repo", default=".", help="the checkout the tasks run bench/ from (default: .)")
    p.add_argument("--executor", choices=EXECUTORS, default="slurm",
                   help="slurm (a job array), local (subprocesses here, all at once) or debug (in this process)")
    p.add_argument("--per", choices=SPLITS, default="model",
                   help="one task per model (default: one load, one dense evaluation) or per model and objective")
    p.add_argument("--model", action="append", metavar="ID", help="only this model (repeatable)")
    p.add_argument("--objective", action="append", metavar="NAME", help="only this objective (repeatable)")
    p.add_argument("-k", default=None, metavar="EXPR", help="pytest -k on top (e.g. 'oneshot and M7')")
    p.add_argument("--ci-slice", action="store_true", help="only the grid's [ci] cells (default: every cell)")
    p.add_argument("--partition", default=None, help="SLURM partition")
    p.add_argument("--gpus-per-task", type=positive(0), default=1, help="GPUs per task (default 1)")
    p.add_argument("--cpus-per-task", type=positive(1), default=8,
                   help="CPUs per task, and its torch threads (default 8; local executor: at most this machine's "
                        "cores shared among the tasks)")
    p.add_argument("--mem-gb", type=positive(1), default=None, help="host memory per task in GB")
    p.add_argument("--timeout-min", type=positive(1), default=24 * 60, help="time limit per task (default 1440)")
    p.add_argument("--array-parallelism", type=positive(1), default=None, help="tasks running at once (SLURM)")
    p.add_argument("--folder", default=None, help="submitit's folder: pickled tasks, logs (default: <results>/.submitit)")
    p.add_argument("--wait", action="store_true", help="wait for the tasks and print their outcomes")
    p.add_argument("--report", default=None, metavar="FILE", help="with --wait: write the merged report here")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest arguments for every task")
    p.set_defaults(func=cmd_submit)
