"""``depthprune prune``, ``cell`` and ``evaluate``: a model with some blocks removed, found or given."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from depthprune.cli.common import (
    add_model_args,
    check_destination,
    kv_arg,
    layers_arg,
    model_spec,
    objective_params_from_flags,
    positive,
    result_summary,
    tasks_arg,
)
from depthprune.cli.errors import EXIT_FAILURE
from depthprune.cli.heal import add_heal_args, check_heal_inputs, heal_config
from depthprune.common import layout
from depthprune.common.errors import InputError


def cmd_prune(args: argparse.Namespace) -> int:
    from depthprune.common.jsonio import write_json_atomic
    from depthprune.model import resolve_device, resolve_dtype
    from depthprune.objectives import OBJECTIVES, make_objective
    from depthprune.recipe import Session, check_budget, count_layers, identity, make_result, save_pruned
    from depthprune.results.schema import Result
    from depthprune.search import SEARCHERS, get_searcher

    # -- validate: everything that can be checked before loading weights (exit 2) --------
    spec = model_spec(args.model)
    if args.objective not in OBJECTIVES:
        raise InputError(f"--objective {args.objective!r} is unknown; allowed: {OBJECTIVES.allowed()}")
    if args.search not in SEARCHERS:
        raise InputError(f"--search {args.search!r} is unknown; allowed: {SEARCHERS.allowed()}")
    search_params = dict(args.param or [])
    try:
        get_searcher(args.search, **search_params)
    except (TypeError, ValueError) as err:
        raise InputError(f"--param: {err}") from None
    objective_params = objective_params_from_flags(args)
    try:
        make_objective(args.objective, args.profile or spec.profile, **objective_params)
    except (TypeError, ValueError) as err:
        raise InputError(f"--objective-param: {err}") from None
    try:
        resolve_dtype(args.dtype, resolve_device(args.device))
    except ValueError as err:
        raise InputError(f"--device/--dtype: {err}") from None
    check_destination(args.save, "--save", kind="dir", overwrite=args.overwrite)
    check_destination(args.json, "--json")
    heal_cfg = heal_inputs = None
    if args.heal:
        if args.dtype not in ("auto", "float32"):
            raise InputError(f"--dtype {args.dtype}: --heal runs in float32 on every machine (so heals compare), and "
                             "so does its search; allowed: auto, float32")
        heal_cfg = heal_config(args, args.profile or spec.profile)
        heal_inputs = check_heal_inputs(spec, heal_cfg, args.profile or spec.profile, args.allow_download)
    n_layers = count_layers(spec, args.allow_download)
    protected = args.protect or ()
    bad = [i for i in protected if not 0 <= i < n_layers]
    if bad:
        raise InputError(f"--protect {','.join(map(str, bad))}: {spec.id} has {n_layers} layers; allowed 0..{n_layers - 1}")
    try:
        check_budget(spec, n_layers, args.budget, protected)
    except ValueError as err:
        raise InputError(f"--{err}") from None

    # -- run (a failure here exits 1) -------------------------------------------------------
    session = Session.open(spec, profile=args.profile, device=args.device,
                           dtype="float32" if args.heal else args.dtype, batch_size=args.batch_size,
                           allow_download=args.allow_download)
    calib = session.calibrate(args.objective, **objective_params)
    outcome = calib.search(args.search, args.budget, seed=args.seed, params=search_params, protected=protected,
                           progress=False if args.quiet else args.search)
    eval_config = session.profile.eval_config() if args.evaluate else None
    evaluation = session.evaluate(outcome.removed, eval_config) if args.evaluate else None
    ident = identity(session, calib, args.search, args.budget, args.seed)
    result = make_result(session, calib, outcome, ident, evaluation, eval_config, protected=protected)
    for line in result_summary(Result.of(result)):
        print(line)
    model = None
    if heal_cfg is not None and heal_inputs is not None:
        from depthprune.healing.pruned import evaluate_healed, heal_removed, healed_result

        model, report = heal_removed(session, outcome.removed, heal_cfg, *heal_inputs, in_place=True,
                                     progress=False if args.quiet else "heal")
        healed_eval = evaluate_healed(session, model, report, eval_config) if eval_config is not None else None
        result = healed_result(result, report, healed_eval, eval_config, session.device)
        print(f"healed     {heal_cfg.tag}: {report.steps} steps, {report.tokens} tokens in {report.seconds:.1f} s; "
              f"loss {report.losses[0]:.4f} -> {report.losses[-1]:.4f}")
        if healed_eval is not None:
            shown = [f"{k} {v:.4f}" for k, v in healed_eval.metrics.items()
                     if k in ("wikitext2_ppl", "c4_ppl", "avg_acc")]
            print(f"healed     {', '.join(shown)}")
    if args.json:
        from depthprune.results.schema import to_json

        write_json_atomic(args.json, to_json(result))
        print(f"wrote      {args.json}")
    if args.save and model is not None:
        from depthprune.healing.pruned import save_healed

        out = save_healed(session, model, result, args.save)
        print(f"saved      {out} ({n_layers - len(outcome.removed)} layers, healed and merged)")
    elif args.save:
        out = save_pruned(session, result, args.save)
        print(f"saved      {out} ({n_layers - len(outcome.removed)} layers)")
    return 0


def cmd_cell(args: argparse.Namespace) -> int:
    from depthprune.grid.cases import CaseFileError, load_grids
    from depthprune.grid.reference import compare, format_failure, read_reference, reference_dtypes
    from depthprune.grid.runner import CellSkipped, GridRunner
    from depthprune.results.schema import Result

    if not Path(args.cases).is_dir():
        raise InputError(f"--cases {args.cases}: not a directory of case files")
    try:
        grids = load_grids(args.cases)
    except CaseFileError as err:
        raise InputError(str(err)) from None
    found = [(g, c) for g in grids for c in g.cells() if c.id == args.cell and (args.grid in (None, g.name))]
    if not found:
        names = ", ".join(g.name for g in grids)
        raise InputError(f"cell {args.cell!r} is in no grid of {args.cases} ({names}); "
                         "ids read <model>-<objective>-<searcher>-M<budget>")
    if len(found) > 1:
        raise InputError(f"cell {args.cell!r} is in grids {', '.join(g.name for g, _ in found)}; pass --grid")
    grid, cell = found[0]
    check_destination(args.results, "--results", kind="dir")
    try:
        runner = GridRunner(args.results, device=args.device, redo=args.redo)
    except ValueError as err:  # DEPTHPRUNE_SCORE_STORE
        raise InputError(str(err)) from None
    try:
        result = runner.result(grid, cell)
    except CellSkipped as reason:
        print(f"{cell.id}: skipped: {reason}")
        return 0
    finally:
        runner.close()
    print(f"cell       {grid.name}/{cell.id} ({'resumed' if runner.resumed else 'ran'})")
    for line in result_summary(Result.of(result)):
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
    from depthprune.common.jsonio import write_json_atomic
    from depthprune.common.text_tables import markdown_table
    from depthprune.data.profiles import get_profile
    from depthprune.evaluation.evaluate import default_cache_dir
    from depthprune.model import WeightsUnavailable, resolve
    from depthprune.recipe import Session, count_layers
    from depthprune.results.provenance import environment

    try:
        spec = resolve(args.model)
    except (ValueError, WeightsUnavailable) as err:
        raise InputError(f"--model: {err}") from None
    profile = get_profile(args.profile or spec.profile)
    try:
        cfg = profile.eval_config(tasks=args.tasks, seq_len=args.seq_len, limit=args.limit,
                                  batch_size=args.batch_size, lambada=not args.no_lambada, adapter=args.adapter,
                                  perplexity=() if args.no_perplexity else None)
    except (TypeError, ValueError) as err:
        raise InputError(f"--tasks: {err}") from None
    check_destination(args.json, "--json")
    n_layers = count_layers(spec, args.allow_download)
    removed = args.remove or ()
    bad = [i for i in removed if not 0 <= i < n_layers]
    if bad or len(removed) >= n_layers:
        raise InputError(f"--remove {','.join(map(str, removed))}: {spec.id} has {n_layers} layers; "
                         f"allowed: fewer than {n_layers} distinct indices in 0..{n_layers - 1}")
    session = Session.open(spec, profile=profile, device=args.device, dtype=args.dtype,
                           allow_download=args.allow_download)
    result = session.evaluate(removed, cfg, cache_dir=None if args.no_cache else default_cache_dir())
    rows = [(k, f"{v:.4f}") for k, v in result.metrics.items() if not k.endswith("_stderr")]
    print(f"{spec.id} without layers [{','.join(map(str, removed))}] "
          f"({result.seconds:.1f} s{', cached' if result.cached else ''})")
    print(markdown_table(rows, ("metric", "value"), numparse=True))
    if args.json:
        write_json_atomic(args.json, {"model": spec.id, "weights": session.weights, "removed": list(removed),
                                      "metrics": result.metrics, "protocol": result.protocol,
                                      "seconds": result.seconds, "item_outcomes": result.items,
                                      "item_clusters": result.clusters, "window_nll": result.windows,
                                      "environment": environment(session.device, session.dtype)})
        print(f"wrote {args.json}")
    return 0


def register(sub: Any) -> None:
    """Add ``prune``, ``cell`` and ``evaluate`` to the ``depthprune`` subparsers ``sub``."""
    from depthprune.data.protocol import ADAPTERS
    from depthprune.objectives import OBJECTIVES
    from depthprune.search import SEARCHERS

    p = sub.add_parser("prune", help="find the blocks to remove; optionally evaluate and save the smaller checkpoint")
    add_model_args(p)
    p.add_argument("--objective", default="ppl", help=f"calibration objective ({OBJECTIVES.allowed()})")
    p.add_argument("--search", default="greedy", help=f"searcher ({SEARCHERS.allowed()})")
    p.add_argument("--budget", type=int, required=True, help="number of blocks to remove (M)")
    p.add_argument("--seed", type=int, default=0, help="the searcher's seed")
    p.add_argument("--calib-samples", type=positive(1), default=None,
                   help="calibration windows (ppl, kl) or items (margin); default: the profile's")
    p.add_argument("--seq-len", type=positive(2), default=None,
                   help="calibration window length in tokens (objectives with windows: ppl, kl)")
    p.add_argument("--calib-seed", type=positive(0), default=None, help="seed of the calibration sample")
    p.add_argument("--objective-param", type=kv_arg, action="append", metavar="KEY=VALUE",
                   help="any other objective parameter (e.g. answer=cloze, dataset=c4_train)")
    p.add_argument("--batch-size", type=positive(1), default=None,
                   help="sequences per forward micro-batch (default: the profile's)")
    p.add_argument("--param", type=kv_arg, action="append", metavar="KEY=VALUE", help="searcher hyper-parameter")
    p.add_argument("--protect", type=layers_arg, default=None, metavar="I,J", help="layers that may not be removed")
    p.add_argument("--evaluate", action="store_true", help="also run the perplexity suite and zero-shot tasks")
    p.add_argument("--save", default=None, metavar="DIR", help="write the pruned checkpoint here")
    p.add_argument("--overwrite", action="store_true", help="allow --save into a non-empty directory")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result (schema 2) as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--heal", action="store_true",
                   help="heal the pruned model (LoRA, merged; float32) before it is evaluated and saved")
    add_heal_args(p)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("cell", help="run (or resume) one grid cell by its id, outside pytest")
    p.add_argument("cell", help="cell id, e.g. tiny-llama3-ppl-greedy-M3")
    p.add_argument("--grid", default=None, help="the grid, where an id is in several")
    p.add_argument("--cases", default=layout.CASES, help="directory of case files (default: ./cases)")
    p.add_argument("--results", default=layout.RESULTS, help="results directory (default: ./results)")
    p.add_argument("--reference-dir", default=layout.REFERENCE, help="compare with the reference here, if any")
    p.add_argument("--redo", action="store_true", help="recompute even if a finished result exists")
    p.add_argument("--device", default=None, help="device (default: the grid's)")
    p.set_defaults(func=cmd_cell)

    p = sub.add_parser("evaluate", help="perplexity suite + zero-shot tasks of the model without some layers")
    add_model_args(p)
    p.add_argument("--remove", type=layers_arg, default=(), metavar="I,J,K", help="layers to remove (default none)")
    p.add_argument("--tasks", type=tasks_arg, default=None,
                   help="comma-separated zero-shot tasks (default: hellaswag,winogrande,arc_easy,arc_challenge,piqa,boolq)")
    p.add_argument("--no-lambada", action="store_true", help="skip LAMBADA")
    p.add_argument("--no-perplexity", action="store_true", help="skip WikiText-2 / C4 perplexity")
    p.add_argument("--seq-len", type=positive(2), default=None, help="perplexity window length (paper 2048; tiny 256)")
    p.add_argument("--limit", type=positive(1), default=None, help="lm-eval items per task (default all)")
    p.add_argument("--batch-size", type=positive(1), default=None)
    p.add_argument("--adapter", choices=ADAPTERS, default=None,
                   help="lm-eval model: shared-prefix (default; each shared context once) or stock hflm")
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the evaluation cache")
    p.add_argument("--json", default=None, metavar="FILE", help="write metrics and protocol as JSON")
    p.set_defaults(func=cmd_evaluate)
