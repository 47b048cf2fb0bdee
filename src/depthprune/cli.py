"""``depthprune`` command line: prune, cell, evaluate, report, archive, verify, plan, submit.

Exit status: 0 on success; 2 for a usage error (bad input: one line naming the flag and
what is allowed, or the result file or archive that is broken and how, before anything is
loaded or written); 1 for a failure during the run
(one line with its reason; ``DEPTHPRUNE_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from depthprune.result import ResultFileError

EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(ValueError):
    """Bad command-line input (exit status 2)."""


def _layers_arg(text: str) -> tuple[int, ...]:
    try:
        layers = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices like 3,7,9, got {text!r}") from None
    twice = sorted({i for i in layers if layers.count(i) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"layer {', '.join(map(str, twice))} given twice in {text!r}; "
                                         "each layer is removed once")
    return tuple(sorted(layers))


def _kv_arg(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def _positive(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _tasks_arg(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def check_destination(path: str | None, flag: str, kind: str = "file", overwrite: bool = True) -> None:
    """Decide up front whether writing ``path`` will work, by doing what the write will do.

    The write creates missing parent directories under the nearest existing ancestor, so
    that ancestor must be a directory in which a file can really be created: this is
    probed with a temporary file (removed at once), which also catches read-only mounts,
    ``/proc`` and paths under a regular file, where a permission check would pass.
    """
    if path is None:
        return
    p = Path(path).expanduser()
    if p.exists():
        if kind == "file" and p.is_dir():
            raise UsageError(f"{flag} {path}: is a directory, expected a file path")
        if kind == "dir" and not p.is_dir():
            raise UsageError(f"{flag} {path}: exists and is not a directory")
        if kind == "dir" and any(p.iterdir()) and not overwrite:
            raise UsageError(f"{flag} {path}: directory exists and is not empty (pass --overwrite)")
    ancestor = p if kind == "dir" and p.is_dir() else p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{flag} {path}: {ancestor} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=ancestor, prefix=".depthprune-probe-"):
            pass
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot create files in {ancestor} ({err.strerror or err})") from None


def _add_model_args(p: argparse.ArgumentParser) -> None:
    from depthprune.profiles import PROFILES

    p.add_argument("--model", required=True, help="registry id (e.g. tiny-llama3, llama3-8b), local dir or Hub id")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--dtype", default="auto",
                   help="auto (bf16 on cuda; on a cpu bf16 where its bf16 matmuls run on AMX, else fp32) | float32 | bfloat16 | float16")
    p.add_argument("--allow-download", action="store_true", help="let transformers fetch missing weights from the Hub")
    p.add_argument("--profile", choices=tuple(PROFILES), default=None,
                   help="data profile (default: the model's; local/Hub models use 'paper')")


#: Objective-size flags and the objective fields they set, first match wins.
SIZE_FLAGS = {
    "--calib-samples": ("calib_samples", ("n_samples", "n_items")),
    "--seq-len": ("seq_len", ("seq_len",)),
    "--calib-seed": ("calib_seed", ("seed",)),
}


def objective_params_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Map the size flags onto the objective's own fields; refuse a flag that does not apply."""
    from depthprune.objectives import OBJECTIVES, objective_fields

    fields = objective_fields(args.objective)
    params: dict[str, Any] = {}
    for flag, (dest, candidates) in SIZE_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        target = next((f for f in candidates if f in fields), None)
        if target is None:
            applies = [n for n in OBJECTIVES.names() if set(candidates) & objective_fields(n)]
            raise UsageError(f"{flag} does not apply to --objective {args.objective} (it has no "
                             f"{' or '.join(candidates)}); it applies to: {', '.join(applies)}")
        params[target] = value
    for key, value in args.objective_param or []:
        if key not in fields:
            raise UsageError(f"--objective-param {key}: objective {args.objective!r} has no such parameter; "
                             f"allowed: {', '.join(sorted(fields))}")
        params[key] = value
    return params


def result_summary(result: dict[str, Any]) -> list[str]:
    """The lines both ``prune`` and ``cell`` print; the cost line is the result's own."""
    ident, cost = result["identity"], result["cost"]
    removed = ",".join(map(str, result["removed"]))
    lines = [
        f"model      {ident['model']} ({result['n_layers']} layers, weights {ident['weights']})",
        f"objective  {ident['objective']}  dense loss {result['dense_calibration_loss']:.6f}",
        f"search     {ident['search']}  budget {ident['budget']}  seed {ident['search_seed']}",
        f"removed    {removed}",
        f"loss       {result['calibration_loss']:.6f}  "
        f"(+{result['calibration_loss'] - result['dense_calibration_loss']:.6f} vs dense)",
        f"cost       {cost['evaluations']} evaluations, {cost['layer_forwards']} layer-forwards, "
        f"{cost['layer_backwards']} layer-backwards (as if alone); {cost['seconds']:.2f} s",
    ]
    if result.get("evaluated"):
        m = result["metrics"]
        shown = [f"{k} {v:.4f}" for k, v in m.items() if k in ("wikitext2_ppl", "c4_ppl", "avg_acc")]
        lines.append(f"metrics    {', '.join(shown)}")
    return lines


def cmd_prune(args: argparse.Namespace) -> int:
    from depthprune.env import write_json_atomic
    from depthprune.models import WeightsUnavailable, resolve, resolve_device, resolve_dtype
    from depthprune.objectives import OBJECTIVES, make_objective
    from depthprune.recipe import Session, check_budget, count_layers, identity, make_result, save_pruned
    from depthprune.search import SEARCHERS, get_searcher

    # -- validate: everything that can be checked before loading weights (exit 2) --------
    try:
        spec = resolve(args.model)
    except WeightsUnavailable as err:
        raise UsageError(f"--model {args.model}: {err}") from None
    except ValueError as err:
        raise UsageError(f"--model: {err}") from None
    if args.objective not in OBJECTIVES:
        raise UsageError(f"--objective {args.objective!r} is unknown; allowed: {OBJECTIVES.allowed()}")
    if args.search not in SEARCHERS:
        raise UsageError(f"--search {args.search!r} is unknown; allowed: {SEARCHERS.allowed()}")
    search_params = dict(args.param or [])
    try:
        get_searcher(args.search, **search_params)
    except (TypeError, ValueError) as err:
        raise UsageError(f"--param: {err}") from None
    objective_params = objective_params_from_flags(args)
    try:
        make_objective(args.objective, args.profile or spec.profile, **objective_params)
    except (TypeError, ValueError) as err:
        raise UsageError(f"--objective-param: {err}") from None
    try:
        resolve_dtype(args.dtype, resolve_device(args.device))
    except ValueError as err:
        raise UsageError(f"--device/--dtype: {err}") from None
    check_destination(args.save, "--save", kind="dir", overwrite=args.overwrite)
    check_destination(args.json, "--json")
    n_layers = count_layers(spec, args.allow_download)
    protected = args.protect or ()
    bad = [i for i in protected if not 0 <= i < n_layers]
    if bad:
        raise UsageError(f"--protect {','.join(map(str, bad))}: {spec.id} has {n_layers} layers; allowed 0..{n_layers - 1}")
    try:
        check_budget(spec, n_layers, args.budget, protected)
    except ValueError as err:
        raise UsageError(f"--{err}") from None

    # -- run (a failure here exits 1) -------------------------------------------------------
    session = Session.open(spec, profile=args.profile, device=args.device, dtype=args.dtype,
                           batch_size=args.batch_size, allow_download=args.allow_download)
    calib = session.calibrate(args.objective, **objective_params)
    outcome = calib.search(args.search, args.budget, seed=args.seed, params=search_params, protected=protected,
                           progress=False if args.quiet else args.search)
    eval_config = session.profile.eval_config() if args.evaluate else None
    evaluation = session.evaluate(outcome.removed, eval_config) if args.evaluate else None
    ident = identity(session, calib, args.search, args.budget, args.seed)
    result = make_result(session, calib, outcome, ident, evaluation, eval_config, protected=protected)
    for line in result_summary(result):
        print(line)
    if args.json:
        from depthprune.result import to_json

        write_json_atomic(args.json, to_json(result))
        print(f"wrote      {args.json}")
    if args.save:
        out = save_pruned(session, result, args.save)
        print(f"saved      {out} ({n_layers - len(outcome.removed)} layers)")
    return 0


def cmd_cell(args: argparse.Namespace) -> int:
    from depthprune.grid.cases import CaseFileError, load_grids
    from depthprune.grid.reference import compare, format_failure, read_reference, reference_dtypes
    from depthprune.grid.runner import CellSkipped, GridRunner

    if not Path(args.cases).is_dir():
        raise UsageError(f"--cases {args.cases}: not a directory of case files")
    try:
        grids = load_grids(args.cases)
    except CaseFileError as err:
        raise UsageError(str(err)) from None
    found = [(g, c) for g in grids for c in g.cells() if c.id == args.cell and (args.grid in (None, g.name))]
    if not found:
        names = ", ".join(g.name for g in grids)
        raise UsageError(f"cell {args.cell!r} is in no grid of {args.cases} ({names}); "
                         "ids read <model>-<objective>-<searcher>-M<budget>")
    if len(found) > 1:
        raise UsageError(f"cell {args.cell!r} is in grids {', '.join(g.name for g, _ in found)}; pass --grid")
    grid, cell = found[0]
    check_destination(args.results, "--results", kind="dir")
    try:
        runner = GridRunner(args.results, device=args.device, redo=args.redo)
    except ValueError as err:  # DEPTHPRUNE_SCORE_STORE
        raise UsageError(str(err)) from None
    try:
        result = runner.result(grid, cell)
    except CellSkipped as reason:
        print(f"{cell.id}: skipped: {reason}")
        return 0
    finally:
        runner.close()
    print(f"cell       {grid.name}/{cell.id} ({'resumed' if runner.resumed else 'ran'})")
    for line in result_summary(result):
        print(line)
    dtype = result["environment"]["dtype"]
    ref_dir = grid.reference_dir(args.reference_dir)
    reference = read_reference(ref_dir, cell.id, dtype)
    if reference is None:
        others = reference_dtypes(ref_dir, cell.id)
        made = f" (only in {', '.join(others)}: results of different precisions are never compared)" if others else ""
        print(f"reference  none for {dtype} in {ref_dir}{made}")
        return 0
    problems, notes = compare(result, reference)
    for note in notes:
        print(f"note       {note}")
    if problems:
        print(format_failure(cell.id, problems, notes), file=sys.stderr)
        return EXIT_FAILURE
    print("reference  matches")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from depthprune.env import environment, write_json_atomic
    from depthprune.evaluate import default_cache_dir
    from depthprune.models import WeightsUnavailable, resolve
    from depthprune.profiles import get_profile
    from depthprune.recipe import Session, count_layers

    try:
        spec = resolve(args.model)
    except (ValueError, WeightsUnavailable) as err:
        raise UsageError(f"--model: {err}") from None
    profile = get_profile(args.profile or spec.profile)
    try:
        cfg = profile.eval_config(tasks=args.tasks, seq_len=args.seq_len, limit=args.limit,
                                  batch_size=args.batch_size, lambada=not args.no_lambada, adapter=args.adapter,
                                  perplexity=() if args.no_perplexity else None)
    except (TypeError, ValueError) as err:
        raise UsageError(f"--tasks: {err}") from None
    check_destination(args.json, "--json")
    n_layers = count_layers(spec, args.allow_download)
    removed = args.remove or ()
    bad = [i for i in removed if not 0 <= i < n_layers]
    if bad or len(removed) >= n_layers:
        raise UsageError(f"--remove {','.join(map(str, removed))}: {spec.id} has {n_layers} layers; "
                         f"allowed: fewer than {n_layers} distinct indices in 0..{n_layers - 1}")
    session = Session.open(spec, profile=profile, device=args.device, dtype=args.dtype,
                           allow_download=args.allow_download)
    result = session.evaluate(removed, cfg, cache_dir=None if args.no_cache else default_cache_dir())
    rows = [(k, f"{v:.4f}") for k, v in result.metrics.items() if not k.endswith("_stderr")]
    print(f"{spec.id} without layers [{','.join(map(str, removed))}] "
          f"({result.seconds:.1f} s{', cached' if result.cached else ''})")
    print(tabulate(rows, headers=("metric", "value"), tablefmt="github"))
    if args.json:
        write_json_atomic(args.json, {"model": spec.id, "weights": session.weights, "removed": list(removed),
                                      "metrics": result.metrics, "protocol": result.protocol,
                                      "seconds": result.seconds, "item_outcomes": result.items,
                                      "item_clusters": result.clusters, "window_nll": result.windows,
                                      "environment": environment(session.device, session.dtype)})
        print(f"wrote {args.json}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import time

    from depthprune.report import write_report

    for d in args.results:
        if not Path(d).is_dir():
            raise UsageError(f"--results {d}: not a directory")
    check_destination(args.out, "--out")
    from depthprune.report import readme as readme_block

    if args.readme is not None and not readme_block.has_block(args.readme):
        raise UsageError(f"--readme {args.readme}: no verdict block to rewrite (a line starting "
                         f"'<!-- verdicts:start' and one '{readme_block.END}')")
    readme = None if args.no_readme else args.readme or readme_block.beside(args.out)
    start = time.perf_counter()
    command = "depthprune report " + " ".join(f"--results {d}" for d in args.results) + f" --out {args.out}"
    out = write_report(args.results, args.out, args.figures, command=command, reference_dir=args.reference_dir,
                       cases_dir=args.cases, reports_dir=args.reports, readme=readme)
    print(f"wrote {out}{f' and the verdict block of {readme}' if readme else ''} in "
          f"{time.perf_counter() - start:.1f} s")
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    from depthprune.grid.archive import write_archives

    if not Path(args.results).is_dir():
        raise UsageError(f"--results {args.results}: not a directory")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a directory")
    written = write_archives(args.results, args.out)
    if not written:
        raise UsageError(f"--results {args.results}: no grid directory with finished results in it")
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    import time

    from depthprune.verify import run

    for d in args.results:
        if not Path(d).is_dir():
            raise UsageError(f"--results {d}: not a directory")
    if args.json:
        check_destination(args.json, "--json")
    try:
        cells = run.select_cells(args.results, args.grid, args.cell)
        if not args.replay_only:
            run.check_weights(cells)
    except run.SelectionError as err:
        raise UsageError(str(err)) from None
    if not args.replay_only:
        return _verify_remeasure(args, cells)
    start = time.perf_counter()
    replays = run.replay_cells(cells, progress=sys.stderr.isatty())
    seconds = time.perf_counter() - start
    for line in run.cell_lines(replays):
        print(line)
    print(run.summary(replays))
    print(f"replayed {len(replays)} cells in {seconds:.1f} s (no model loaded: each searcher against its recorded trace)")
    if args.json:
        from depthprune.env import write_json_atomic

        write_json_atomic(args.json, run.report_json(replays, args.results, seconds))
        print(f"wrote {args.json}")
    return EXIT_FAILURE if any(r.status == run.FAILED for r in replays) else 0


def _verify_remeasure(args: argparse.Namespace, cells: list[dict[str, Any]]) -> int:
    """``depthprune verify`` without --replay-only: replay, then re-score on this machine against bands."""
    import time

    from depthprune.env import environment, git_revision, write_json_atomic
    from depthprune.precision import cap_prefix
    from depthprune.verify import bands, evaluation, remeasure, run

    args.bands = args.bands or str(bands.BANDS_FILE)
    table = bands.load_table(args.bands)
    measure = None
    if args.measure_bands:
        command = cap_prefix() + "depthprune verify " + " ".join(f"--results {d}" for d in args.results) + \
            "".join(f" --grid {g}" for g in args.grid or []) + "".join(f" --cell {c}" for c in args.cell or []) + \
            " --measure-bands" + (f" --dtype {args.dtype}" if args.dtype != "auto" else "")
        provenance = {"command": command, "commit": git_revision(), "cells": sorted(c["cell"] for c in cells),
                      "machine": environment("cpu", "float32")["kernels"], "rule": bands.RULE,
                      "dtype": args.dtype,
                      "what": "each condition's measuring sets (dense, singles, held-out trace sets per size: "
                              "depthprune.verify.bands), recorded against re-scored here"
                              + ("; each removed set's sampled items and windows (depthprune.verify.evaluation, "
                                 f"rule {evaluation.RULE}), recorded against evaluated here" if not args.no_evaluation
                                 else "")}

        def measure(differences, evaluation):
            nonlocal table
            table = bands.measure(differences, provenance, table, evaluation)
            write_json_atomic(args.bands, table)
            return table

    start = time.perf_counter()
    population = run.select_cells(args.results, sorted({c["grid"] for c in cells}))
    checks, _ = remeasure.remeasure(cells, table, seed=args.seed, progress=sys.stderr.isatty(),
                                    measure_bands=measure, population=population,
                                    evaluate=not args.no_evaluation, dtype=args.dtype)
    seconds = time.perf_counter() - start
    for line in run.remeasure_lines(checks):
        print(line)
    print(run.remeasure_summary(checks))
    print(f"verified {len(checks)} cells in {seconds:.1f} s on {checks[0].here_class if checks else '?'} "
          + ("(sets and decisions re-scored; task items and perplexity windows not re-evaluated: --no-evaluation)"
             if args.no_evaluation else "(sets and decisions re-scored; each removed set's sampled task items and "
                                        "perplexity windows re-evaluated)"))
    if args.measure_bands:
        print(f"wrote the bands of these models to {args.bands}")
    if args.json:
        write_json_atomic(args.json, {"mode": "re-measure", "results": [str(r) for r in args.results],
                                      "seconds": round(seconds, 3), "cells": [c.to_dict() for c in checks]})
        print(f"wrote {args.json}")
    return EXIT_FAILURE if any(c.status == remeasure.FAILED for c in checks) else 0


def cmd_durations(args: argparse.Namespace) -> int:
    from depthprune.grid.results import iter_results
    from depthprune.grid.schedule import DURATIONS_DIR, durations_from_results, write_durations

    for d in args.results:
        if not Path(d).is_dir():
            raise UsageError(f"--results {d}: not a directory")
    rows = [r for r in iter_results(args.results) if r.get("grid") == args.grid]
    if not rows:
        raise UsageError(f"--grid {args.grid}: no finished result of that grid under {', '.join(args.results)}")
    revisions = sorted({r.get("environment", {}).get("git_revision", "?") for r in rows})
    source = (f"{len(rows)} results of grid {args.grid} in {', '.join(args.results)} (code {', '.join(revisions)}); "
              f"written by: depthprune durations --grid {args.grid} " + " ".join(f"--results {d}" for d in args.results))
    out = write_durations(args.out or DURATIONS_DIR / f"{args.grid}.json", durations_from_results(rows), source)
    print(f"wrote {out}: {len(rows)} cells")
    return 0


def cmd_time_split(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from depthprune.grid.results import iter_dense, iter_results
    from depthprune.grid.time_split import per_phase, per_searcher, repeats

    if not Path(args.results).is_dir():
        raise UsageError(f"--results {args.results}: not a directory")
    rows = [r for r in iter_results([args.results]) if r.get("grid") == args.grid]
    if not rows:
        raise UsageError(f"--grid {args.grid}: no finished result of that grid under {args.results}")
    dense = [d for d in iter_dense([args.results]) if d.get("grid") == args.grid]
    cache = Path(args.results) / "eval-cache"
    print(f"{len(rows)} cells of grid {args.grid} in {args.results}\n")
    print(tabulate(per_phase(rows, dense, cache if cache.is_dir() else None, args.wall, args.workers),
                   headers="keys", tablefmt="github"), end="\n\n")
    print(tabulate(per_searcher(rows), headers="keys", tablefmt="github"), end="\n\n")
    print(tabulate(repeats(rows), headers="keys", tablefmt="github"))
    return 0


def _load_grid(cases: str, name: str):
    """The named grid of ``cases`` or a UsageError naming the flag and what is allowed."""
    from depthprune.grid.cases import CaseFileError, load_grids

    if not Path(cases).is_dir():
        raise UsageError(f"--cases {cases}: not a directory of case files")
    try:
        grids = {g.name: g for g in load_grids(cases)}
    except CaseFileError as err:
        raise UsageError(str(err)) from None
    if name not in grids:
        raise UsageError(f"--grid {name}: no such grid in {cases}; allowed: {', '.join(grids)}")
    return grids[name]


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def cmd_plan(args: argparse.Namespace) -> int:
    from depthprune.env import write_json_atomic
    from depthprune.plan import GPUS, Assumptions, ThroughputError, format_plan, load_throughput, plan_grid

    if args.grid is None and not args.check:
        raise UsageError("--grid is required (or --check DIR to re-count measured results)")
    if args.gpu not in GPUS:
        raise UsageError(f"--gpu {args.gpu!r} is unknown; allowed: {', '.join(GPUS)}")
    for d in [*(args.measured or []), *(args.check or [])]:
        if not Path(d).is_dir():
            raise UsageError(f"--measured/--check {d}: not a directory of results")
    check_destination(args.json, "--json")
    try:
        throughput = None if args.throughput is None else load_throughput(args.throughput)
    except ThroughputError as err:
        raise UsageError(f"--throughput {err}") from None
    status = 0
    if args.check:
        status = _check_plan(args.check)
    if args.grid is None:
        return status
    grid = _load_grid(args.cases, args.grid)
    dtype_bytes = 4 if grid.dtype == "float32" else 2
    assumptions = Assumptions(gpu=args.gpu, gpus=args.gpus, mfu=args.mfu, landscapes=args.landscapes,
                              margin_tokens_per_item=args.margin_tokens, dtype_bytes=dtype_bytes,
                              measured=tuple(args.measured or ()))
    plan = plan_grid(grid, assumptions, throughput)
    print(format_plan(plan))
    if args.json:
        write_json_atomic(args.json, plan.to_dict())
        print(f"wrote {args.json}")
    return status


def _check_plan(dirs: list[str]) -> int:
    """Re-count each result of ``dirs`` from its recorded losses; 1 if any reproducible count differs."""
    from tabulate import tabulate

    from depthprune.grid.results import iter_results
    from depthprune.plan import NotRecorded, check_result

    rows, bad = [], 0
    results = [r for stand_in in (False, True) for r in iter_results(dirs, stand_in=stand_in)]
    for r in results:
        search = r["identity"]["search"]
        if search in ("bo", "cbo"):
            why = "a GP fit per step (bounds only)" if search == "bo" else "energy from gate gradients, not recorded"
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
    print(tabulate(rows, headers=["cell", "search", "run evals", "run layer-fwd", "plan evals", "plan layer-fwd",
                                  "check"], tablefmt="github", disable_numparse=True))
    print(f"checked {len(results)} results: {bad} mismatch(es)")
    return EXIT_FAILURE if bad else 0


def task_threads(executor: str, cpus_per_task: int, n_tasks: int) -> int:
    """Each task's torch threads: its CPUs; with the local executors, whose tasks all run at once on
    this machine, at most this machine's cores shared among them."""
    if executor == "slurm":
        return cpus_per_task
    return max(1, min(cpus_per_task, (os.cpu_count() or 1) // max(1, n_tasks)))


def cmd_submit(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from depthprune.grid.cluster import make_tasks, outcome_rows, submit

    grid = _load_grid(args.cases, args.grid)
    extra = list(args.pytest_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    check_destination(args.results, "--results", kind="dir")
    check_destination(args.report, "--report")
    if args.report and not args.wait:
        raise UsageError("--report needs --wait (the report merges the tasks' results once they are done)")
    try:
        tasks = make_tasks(grid, args.repo, args.results, args.cases, per=args.per, models=tuple(args.model or ()),
                           objectives=tuple(args.objective or ()), full_grid=not args.ci_slice, keyword=args.k,
                           extra=tuple(extra))
    except ValueError as err:
        raise UsageError(f"--model/--objective/--repo: {err}") from None
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
    print(tabulate(outcome_rows(outcomes), headers=["task", "host", "exit", "passed", "failed", "skipped", "s"],
                   tablefmt="github", disable_numparse=True))
    for o in outcomes:
        if not o.ok:
            print(f"--- {o.task} (exit {o.returncode}) ---\n{o.output_tail}", file=sys.stderr)
    if args.report:
        from depthprune.report import write_report

        out = write_report([args.results], args.report, None,
                           command=f"depthprune report --results {args.results} --out {args.report}")
        print(f"wrote      {out}")
    return 0 if all(o.ok for o in outcomes) else EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    from depthprune.evaluate import ADAPTERS
    from depthprune.objectives import OBJECTIVES
    from depthprune.search import SEARCHERS

    parser = argparse.ArgumentParser(prog="depthprune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prune", help="find the blocks to remove; optionally evaluate and save the smaller checkpoint")
    _add_model_args(p)
    p.add_argument("--objective", default="ppl", help=f"calibration objective ({OBJECTIVES.allowed()})")
    p.add_argument("--search", default="greedy", help=f"searcher ({SEARCHERS.allowed()})")
    p.add_argument("--budget", type=int, required=True, help="number of blocks to remove (M)")
    p.add_argument("--seed", type=int, default=0, help="the searcher's seed")
    p.add_argument("--calib-samples", type=_positive(1), default=None,
                   help="calibration windows (ppl, kl) or items (margin); default: the profile's")
    p.add_argument("--seq-len", type=_positive(2), default=None,
                   help="calibration window length in tokens (objectives with windows: ppl, kl)")
    p.add_argument("--calib-seed", type=_positive(0), default=None, help="seed of the calibration sample")
    p.add_argument("--objective-param", type=_kv_arg, action="append", metavar="KEY=VALUE",
                   help="any other objective parameter (e.g. answer=cloze, dataset=c4_train)")
    p.add_argument("--batch-size", type=_positive(1), default=None,
                   help="sequences per forward micro-batch (default: the profile's)")
    p.add_argument("--param", type=_kv_arg, action="append", metavar="KEY=VALUE", help="searcher hyper-parameter")
    p.add_argument("--protect", type=_layers_arg, default=None, metavar="I,J", help="layers that may not be removed")
    p.add_argument("--evaluate", action="store_true", help="also run the perplexity suite and zero-shot tasks")
    p.add_argument("--save", default=None, metavar="DIR", help="write the pruned checkpoint here")
    p.add_argument("--overwrite", action="store_true", help="allow --save into a non-empty directory")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result (schema 2) as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("cell", help="run (or resume) one grid cell by its id, outside pytest")
    p.add_argument("cell", help="cell id, e.g. tiny-llama3-ppl-greedy-M3")
    p.add_argument("--grid", default=None, help="the grid, where an id is in several")
    p.add_argument("--cases", default="cases", help="directory of case files (default: ./cases)")
    p.add_argument("--results", default="results", help="results directory (default: ./results)")
    p.add_argument("--reference-dir", default="reference", help="compare with the reference here, if any")
    p.add_argument("--redo", action="store_true", help="recompute even if a finished result exists")
    p.add_argument("--device", default=None, help="device (default: the grid's)")
    p.set_defaults(func=cmd_cell)

    p = sub.add_parser("evaluate", help="perplexity suite + zero-shot tasks of the model without some layers")
    _add_model_args(p)
    p.add_argument("--remove", type=_layers_arg, default=(), metavar="I,J,K", help="layers to remove (default none)")
    p.add_argument("--tasks", type=_tasks_arg, default=None,
                   help="comma-separated zero-shot tasks (default: hellaswag,winogrande,arc_easy,arc_challenge,piqa,boolq)")
    p.add_argument("--no-lambada", action="store_true", help="skip LAMBADA")
    p.add_argument("--no-perplexity", action="store_true", help="skip WikiText-2 / C4 perplexity")
    p.add_argument("--seq-len", type=_positive(2), default=None, help="perplexity window length (paper 2048; tiny 256)")
    p.add_argument("--limit", type=_positive(1), default=None, help="lm-eval items per task (default all)")
    p.add_argument("--batch-size", type=_positive(1), default=None)
    p.add_argument("--adapter", choices=ADAPTERS, default=None,
                   help="lm-eval model: shared-prefix (default; each shared context once) or stock hflm")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the evaluation cache")
    p.add_argument("--json", default=None, metavar="FILE", help="write metrics and protocol as JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="write REPORT.md (tables, Spearman, overlaps, figures, claims) from results")
    p.add_argument("--results", action="append", required=True, metavar="DIR",
                   help="a results directory (repeat to merge shards/machines)")
    p.add_argument("--out", default="REPORT.md")
    p.add_argument("--figures", default=None, metavar="DIR", help="where the PNGs go (default: figures/ beside --out)")
    p.add_argument("--reference-dir", default="reference", metavar="DIR",
                   help="references; their float32/ folder is the precision control of bf16 cells (default: reference)")
    p.add_argument("--reports", default=None, metavar="DIR",
                   help="where the per-grid pages go (default: reports/ beside --out)")
    p.add_argument("--cases", default="cases", metavar="DIR",
                   help="case files: their main grids without results show as NOT RUN (default: cases)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--readme", default=None, metavar="FILE",
                       help="rewrite this README's verdict block (default: README.md beside --out, if it has the block)")
    which.add_argument("--no-readme", action="store_true", help="leave every README alone")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("archive", help="one compressed file per grid of finished results (a clean clone re-judges them)")
    p.add_argument("--results", default="results", help="the results directory (default: results)")
    p.add_argument("--out", default="archive", help="where the <grid>.jsonl.xz files go (default: archive)")
    p.set_defaults(func=cmd_archive)

    p = sub.add_parser("verify", help="check archived cell results on this machine (--replay-only: each searcher "
                                      "against its recorded trace, no model)")
    p.add_argument("--results", action="append", required=True, metavar="DIR",
                   help="a results directory or a folder of archives such as archive/ (repeatable)")
    p.add_argument("--grid", action="append", metavar="NAME", help="only this grid's cells (repeatable)")
    p.add_argument("--cell", action="append", metavar="ID", help="only this cell (repeatable; exact id)")
    p.add_argument("--replay-only", action="store_true",
                   help="replay each cell's searcher on its recorded trace (the code path, no model loaded)")
    p.add_argument("--json", default=None, metavar="FILE", help="write every cell's outcome and decisions as JSON")
    p.add_argument("--bands", default=None, metavar="FILE",
                   help="the bands table (default: the one shipped with depthprune, depthprune/verify/bands.json)")
    p.add_argument("--measure-bands", action="store_true",
                   help="measure each model's bands here (sets: dense, singles, held-out trace sets; evaluation: "
                        "every removed set's sampled items and windows, cross-fitted), write them to --bands, then verify")
    p.add_argument("--no-evaluation", action="store_true",
                   help="re-score sets and decisions only; do not re-evaluate removed sets' items and windows")
    p.add_argument("--seed", type=_positive(0), default=0,
                   help="seed of the sampled trace sets, items and windows (default 0)")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                   help="precision to re-measure in (default auto: what this machine runs; bfloat16 on a CPU "
                        "without AMX measures its own bf16 kernels against the recorded ones)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("durations", help="record how long a grid's cells took (orders cell groups longest first)")
    p.add_argument("--grid", required=True, help="grid name (a case file's [grid] name, e.g. tiny)")
    p.add_argument("--results", action="append", required=True, metavar="DIR", help="a results directory (repeatable)")
    p.add_argument("--out", default=None, help="where to write (default: cases/durations/<grid>.json)")
    p.set_defaults(func=cmd_durations)

    p = sub.add_parser("time-split", help="where a grid run's time went (per phase, per searcher) and its repeated work")
    p.add_argument("--grid", required=True, help="grid name (a case file's [grid] name, e.g. tiny)")
    p.add_argument("--results", required=True, metavar="DIR", help="the run's results directory")
    p.add_argument("--wall", type=float, default=None, metavar="SECONDS",
                   help="the run's wall time (e.g. pytest's), to show the rest as 'other'")
    p.add_argument("--workers", type=_positive(1), default=1, help="processes the run had (default 1)")
    p.set_defaults(func=cmd_time_split)

    from depthprune.plan import GPUS

    p = sub.add_parser("plan", help="expected layer-forwards, FLOPs, GPU-hours and memory of a grid, before it runs")
    p.add_argument("--grid", default=None, help="grid name (a case file's [grid] name, e.g. paper)")
    p.add_argument("--cases", default="cases", help="directory of case files (default: ./cases)")
    p.add_argument("--gpu", default="h100-80gb", help=f"GPU kind ({', '.join(GPUS)}; default h100-80gb)")
    p.add_argument("--gpus", type=_positive(1), default=8, help="GPUs available, one worker each (default 8)")
    p.add_argument("--mfu", type=_fraction, default=0.35, help="assumed model-FLOPs utilisation (default 0.35, ours)")
    p.add_argument("--landscapes", type=_positive(1), default=4,
                   help="synthetic loss landscapes each searcher is simulated on (default 4)")
    p.add_argument("--margin-tokens", type=_positive(1), default=160,
                   help="assumed padded tokens per margin item (default 160, a guess)")
    p.add_argument("--measured", action="append", metavar="DIR",
                   help="results (e.g. a rehearsal's): measured counts beside the plan, bo's prefix-cache ratio")
    p.add_argument("--check", action="append", metavar="DIR",
                   help="re-count every result in DIR from its recorded losses; exit 1 on a mismatch")
    p.add_argument("--throughput", default=None, metavar="FILE",
                   help="a throughput.json of python -m depthprune.device_check: measured rates instead of --mfu")
    p.add_argument("--json", default=None, metavar="FILE", help="write the plan as JSON")
    p.set_defaults(func=cmd_plan)

    from depthprune.grid.cluster import EXECUTORS, SPLITS

    p = sub.add_parser("submit", help="run a grid as a cluster job array (SLURM, via submitit), one task per model")
    p.add_argument("--grid", required=True, help="grid name (a case file's [grid] name, e.g. paper)")
    p.add_argument("--cases", default="cases", help="directory of case files (default: ./cases)")
    p.add_argument("--results", default="results", help="results directory on a shared filesystem (default: ./results)")
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
    p.add_argument("--gpus-per-task", type=_positive(0), default=1, help="GPUs per task (default 1)")
    p.add_argument("--cpus-per-task", type=_positive(1), default=8,
                   help="CPUs per task, and its torch threads (default 8; local executor: at most this machine's "
                        "cores shared among the tasks)")
    p.add_argument("--mem-gb", type=_positive(1), default=None, help="host memory per task in GB")
    p.add_argument("--timeout-min", type=_positive(1), default=24 * 60, help="time limit per task (default 1440)")
    p.add_argument("--array-parallelism", type=_positive(1), default=None, help="tasks running at once (SLURM)")
    p.add_argument("--folder", default=None, help="submitit's folder: pickled tasks, logs (default: <results>/.submitit)")
    p.add_argument("--wait", action="store_true", help="wait for the tasks and print their outcomes")
    p.add_argument("--report", default=None, metavar="FILE", help="with --wait: write the merged report here")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest arguments for every task")
    p.set_defaults(func=cmd_submit)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits 2 on its own usage errors
    try:
        return args.func(args)
    except (UsageError, ResultFileError) as err:  # a broken result file is bad input too: exit 2, naming it
        print(f"depthprune {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"depthprune {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a failure during the run: one line, status 1
        if os.environ.get("DEPTHPRUNE_DEBUG"):
            raise
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"depthprune {args.command}: failed: {type(err).__name__}: {message}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
