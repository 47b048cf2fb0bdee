"""``depthprune report``, ``archive``, ``verify``, ``durations`` and ``time-split``: what finished results say."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depthprune.cli.common import check_destination, positive
from depthprune.cli.errors import EXIT_FAILURE
from depthprune.common import layout
from depthprune.common.errors import InputError

if TYPE_CHECKING:
    from depthprune.results.schema import Result


def cmd_report(args: argparse.Namespace) -> int:
    import time

    from depthprune.report import write_report

    for d in args.results:
        if not Path(d).is_dir():
            raise InputError(f"--results {d}: not a directory")
    check_destination(args.out, "--out")
    from depthprune.report import readme as readme_block

    if args.readme is not None and not readme_block.has_block(args.readme):
        raise InputError(f"--readme {args.readme}: no verdict block to rewrite (a line starting "
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
    from depthprune.results.archive import write_archives

    if not Path(args.results).is_dir():
        raise InputError(f"--results {args.results}: not a directory")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out}: exists and is not a directory")
    written = write_archives(args.results, args.out)
    if not written:
        raise InputError(f"--results {args.results}: no grid directory with finished results in it")
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    import time

    from depthprune.verify import run

    for d in args.results:
        if not Path(d).is_dir():
            raise InputError(f"--results {d}: not a directory")
    if args.json:
        check_destination(args.json, "--json")
    if args.measure_bands and args.sample != "full":
        raise InputError(f"--sample {args.sample} with --measure-bands: bands are measured on the full sample "
                         "(drop --sample, or verify with the table's bands)")
    try:
        cells = run.select_cells(args.results, args.grid, args.cell)
        if not args.replay_only:
            run.check_weights(cells)
    except run.SelectionError as err:
        raise InputError(str(err)) from None
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
        from depthprune.common.jsonio import write_json_atomic

        write_json_atomic(args.json, run.report_json(replays, args.results, seconds))
        print(f"wrote {args.json}")
    return EXIT_FAILURE if any(r.status == run.FAILED for r in replays) else 0


def _verify_remeasure(args: argparse.Namespace, cells: list[Result]) -> int:
    """``depthprune verify`` without --replay-only: replay, then re-score on this machine against bands."""
    import time

    from tqdm.auto import tqdm

    from depthprune.common.jsonio import write_json_atomic
    from depthprune.model.precision import cap_prefix
    from depthprune.results.provenance import environment, git_revision
    from depthprune.verify import bands, evaluation, remeasure, run

    args.bands = args.bands or str(bands.BANDS_FILE)
    table = bands.load_table(args.bands)
    measure: Callable[[Any, Any, Any], Any] | None = None
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

        def write_bands(differences, evaluation, checks):
            nonlocal table
            table = bands.measure(differences, provenance, table, evaluation, *checks)
            write_json_atomic(args.bands, table)
            return table

        measure = write_bands

    start = time.perf_counter()
    population = run.select_cells(args.results, sorted({c.identity.grid for c in cells if c.identity.grid is not None}))
    done: list[Any] = []

    def report(complete: bool) -> dict[str, Any]:
        return {"mode": "re-measure", "results": [str(r) for r in args.results], "complete": complete,
                "cells_selected": len(cells), "seconds": round(time.perf_counter() - start, 3),
                "model_seconds": run.model_seconds(done), "cells": [c.to_dict() for c in done]}

    def on_check(check: Any) -> None:
        """Each cell as it is decided: its lines on stdout, a progress line where stderr is no terminal (a log),
        and --json rewritten, so an interrupted run keeps every cell it decided."""
        done.append(check)
        for line in run.remeasure_lines([check]):
            tqdm.write(line, file=sys.stdout)
        sys.stdout.flush()
        if not sys.stderr.isatty():
            print(f"verify: {len(done)}/{len(cells)} cells, {check.elapsed:.0f} s: {check.label} "
                  f"{check.grid}/{check.cell}", file=sys.stderr, flush=True)
        if args.json:
            write_json_atomic(args.json, report(complete=False))

    checks, _ = remeasure.remeasure(cells, table, seed=args.seed, progress=sys.stderr.isatty(),
                                    measure_bands=measure, population=population,
                                    evaluate=not args.no_evaluation, dtype=args.dtype,
                                    sample=remeasure.SAMPLES[args.sample], on_check=on_check,
                                    second_opinion=not args.no_second_opinion)
    seconds = time.perf_counter() - start
    print(run.remeasure_summary(checks))
    print(run.model_seconds_line(checks))
    print(f"verified {len(checks)} cells in {seconds:.1f} s on {checks[0].here_class if checks else '?'}, "
          f"sample {args.sample} "
          + ("(sets and decisions re-scored; task items and perplexity windows not re-evaluated: --no-evaluation)"
             if args.no_evaluation else "(sets and decisions re-scored; each removed set's sampled task items and "
                                        "perplexity windows re-evaluated)"))
    if args.measure_bands:
        print(f"wrote the bands of these models to {args.bands}")
    if args.json:
        write_json_atomic(args.json, report(complete=True))
        print(f"wrote {args.json}")
    return EXIT_FAILURE if any(c.status == remeasure.FAILED for c in checks) else 0


def cmd_durations(args: argparse.Namespace) -> int:
    from depthprune.grid.schedule import durations_from_results, write_durations
    from depthprune.results.store import iter_results

    for d in args.results:
        if not Path(d).is_dir():
            raise InputError(f"--results {d}: not a directory")
    rows = [r for r in iter_results(args.results) if r.identity.grid == args.grid]
    if not rows:
        raise InputError(f"--grid {args.grid}: no finished result of that grid under {', '.join(args.results)}")
    revisions = sorted({r.get("environment", {}).get("git_revision", "?") for r in rows})
    source = (f"{len(rows)} results of grid {args.grid} in {', '.join(args.results)} (code {', '.join(revisions)}); "
              f"written by: depthprune durations --grid {args.grid} " + " ".join(f"--results {d}" for d in args.results))
    out = write_durations(args.out or layout.durations_file(layout.CASES, args.grid), durations_from_results(rows), source)
    print(f"wrote {out}: {len(rows)} cells")
    return 0


def cmd_time_split(args: argparse.Namespace) -> int:
    from depthprune.common.text_tables import markdown_table
    from depthprune.grid.time_split import per_phase, per_searcher, repeats
    from depthprune.results.store import iter_dense, iter_results

    if not Path(args.results).is_dir():
        raise InputError(f"--results {args.results}: not a directory")
    rows: list[Result] = [r for r in iter_results([args.results]) if r.identity.grid == args.grid]
    if not rows:
        raise InputError(f"--grid {args.grid}: no finished result of that grid under {args.results}")
    dense: list[Mapping[str, Any]] = [d for d in iter_dense([args.results]) if d.get("grid") == args.grid]
    cache = Path(args.results) / "eval-cache"
    print(f"{len(rows)} cells of grid {args.grid} in {args.results}\n")
    print(markdown_table(per_phase(rows, dense, cache if cache.is_dir() else None, args.wall, args.workers), "keys", numparse=True), end="\n\n")
    print(markdown_table(per_searcher(rows), "keys", numparse=True), end="\n\n")
    print(markdown_table(repeats(rows), "keys", numparse=True))
    return 0


def register(sub: Any) -> None:
    """Add the results commands to the ``depthprune`` subparsers ``sub``."""
    p = sub.add_parser("report", help="write REPORT.md (tables, Spearman, overlaps, figures, claims) from results")
    p.add_argument("--results", action="append", required=True, metavar="DIR",
                   help="a results directory (repeat to merge shards/machines)")
    p.add_argument("--out", default=layout.REPORT)
    p.add_argument("--figures", default=None, metavar="DIR", help="where the PNGs go (default: figures/ beside --out)")
    p.add_argument("--reference-dir", default=layout.REFERENCE, metavar="DIR",
                   help="references; their float32/ folder is the precision control of bf16 cells (default: reference)")
    p.add_argument("--reports", default=None, metavar="DIR",
                   help="where the per-grid pages go (default: reports/ beside --out)")
    p.add_argument("--cases", default=layout.CASES, metavar="DIR",
                   help="case files: their main grids without results show as NOT RUN (default: cases)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--readme", default=None, metavar="FILE",
                       help="rewrite this README's verdict block (default: README.md beside --out, if it has the block)")
    which.add_argument("--no-readme", action="store_true", help="leave every README alone")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("archive", help="one compressed file per grid of finished results (a clean clone re-judges them)")
    p.add_argument("--results", default=layout.RESULTS, help="the results directory (default: results)")
    p.add_argument("--out", default=layout.ARCHIVE, help="where the <grid>.jsonl.xz files go (default: archive)")
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
    p.add_argument("--seed", type=positive(0), default=0,
                   help="seed of the sampled trace sets, items and windows (default 0)")
    p.add_argument("--sample", default="full", choices=["full", "ci"],
                   help="how much of each cell is re-measured (default full: every set its run recorded, as the "
                        "grid's check across precisions compares them, items and windows catching a 1%% change; ci: "
                        "its answer, the dense model and the two sets farthest from it, windows catching a 20%% "
                        "change, no item: what CI checks on every CPU)")
    p.add_argument("--no-second-opinion", action="store_true",
                   help="do not check a cell that fails in another precision again in its recorded one "
                        "(the second opinion, docs/verify.md)")
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
    p.add_argument("--workers", type=positive(1), default=1, help="processes the run had (default 1)")
    p.set_defaults(func=cmd_time_split)
