"""``depthprune speed``: the dense and the rebuilt pruned model's inference speed, measured in one process,
beside the blocks-only prediction L/(L-M) and the per-block cost table's; ``--cost-table`` measures a
table, ``--results DIR --grid NAME`` every distinct removed set of a grid's cells.

Everything that can be checked is checked from the config alone, before any weight loads: the removed
set (in range, not empty, not the whole model), a result file's model against ``--model``, a
checkpoint's origin, the contexts against the model's maximum positions, the destinations.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.cli.common import check_destination, layers_arg, positive
from depthprune.common.errors import InputError
from depthprune.common.jsonio import read_json

#: contexts when neither the flag nor a shipped cost table gives them (short, long; long capped by the model)
DEFAULT_CONTEXTS = (64, 512)


def ints_arg(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated positive integers."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,4, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


@dataclass
class Plan:
    """What a ``speed`` run measures, settled before any weight loads."""

    model_id: str
    n_layers: int
    max_positions: int | None
    removed: tuple[int, ...]
    source: dict[str, Any]
    stand_in: Any = None  # a depthprune.plan.ModelShape, for a random-weight stand-in
    checkpoint: str | None = None


def stand_in_shapes() -> dict[str, Any]:
    """The shapes ``--stand-in`` builds random-weight models at: the planner's real shapes and the device check's tiny ones."""
    from depthprune.plan import SHAPES
    from depthprune.plan.device_phases import SIZES

    return {**SHAPES, **{s.model: s for s in SIZES["tiny"].shapes}}


def _config(path: str, gguf: str | None = None) -> Any:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, **({"gguf_file": gguf} if gguf else {}))
    return getattr(config, "text_config", None) or config


def _check_removed(removed: tuple[int, ...], n_layers: int, model_id: str, where: str) -> None:
    """Refuse an empty set, an index out of range, or every block (a usage error naming ``where``)."""
    if not removed:
        raise InputError(f"{where}: the removed set is empty; remove at least one of {model_id}'s blocks 0..{n_layers - 1}")
    bad = [i for i in removed if not 0 <= i < n_layers]
    if bad:
        raise InputError(f"{where}: block {','.join(map(str, bad))} is out of range; {model_id} has {n_layers} blocks, "
                         f"allowed 0..{n_layers - 1}")
    if len(set(removed)) >= n_layers:
        raise InputError(f"{where}: removes all {n_layers} blocks of {model_id}; allowed: at most {n_layers - 1}")


def plan_run(args: argparse.Namespace) -> Plan:
    """The model, the removed set and where it came from, from the flags and configs alone (usage errors exit 2)."""
    from depthprune.model import WeightsUnavailable, gguf_file_in, locate, resolve

    sources = [f for f, v in (("--remove", args.remove), ("--checkpoint", args.checkpoint), ("--result", args.result),
                              ("--cost-table", args.cost_table or None), ("--results", args.results)) if v is not None]
    if len(sources) != 1:
        raise InputError(f"give exactly one of --remove, --checkpoint, --result, --cost-table, --results (got "
                         f"{', '.join(sources) or 'none'})")
    if args.stand_in:
        shapes = stand_in_shapes()
        if args.stand_in not in shapes:
            raise InputError(f"--stand-in {args.stand_in!r} is unknown; allowed: {', '.join(shapes)}")
        if args.remove is None:
            raise InputError("--stand-in takes --remove (a stand-in has no checkpoint, result or shipped cost table)")
        shape = shapes[args.stand_in]
        _check_removed(args.remove, shape.layers, shape.model, "--remove")
        return Plan(shape.model, shape.layers, None, args.remove, {"remove": list(args.remove)}, stand_in=shape)
    if not args.model:
        raise InputError("--model is required (or --stand-in SHAPE)")
    try:
        spec = resolve(args.model)
        path = locate(spec, allow_download=args.allow_download)
    except WeightsUnavailable as err:
        raise InputError(f"--model {args.model}: {err}") from None
    except ValueError as err:
        raise InputError(f"--model: {err}") from None
    config = _config(path, gguf_file_in(spec, path))
    n = int(config.num_hidden_layers)
    max_pos = getattr(config, "max_position_embeddings", None)
    if args.cost_table:
        return Plan(spec.id, n, max_pos, (), {"cost_table": True})
    if args.remove is not None:
        _check_removed(args.remove, n, spec.id, "--remove")
        return Plan(spec.id, n, max_pos, args.remove, {"remove": list(args.remove)})
    if args.result:
        from depthprune.results.schema import read_result

        result = read_result(args.result)  # a broken file: ResultFileError, exit 2 naming it
        model = result.identity.model
        if model != spec.id:
            raise InputError(f"--result {args.result}: a result of model {model!r}, not of --model {spec.id!r}; "
                             f"pass --model {model} or a result of {spec.id}")
        removed = tuple(sorted(int(i) for i in result["removed"]))
        _check_removed(removed, n, spec.id, f"--result {args.result} (field 'removed')")
        return Plan(spec.id, n, max_pos, removed, {"result": str(args.result), "cell": result.get("cell")})
    ckpt = Path(args.checkpoint)
    if not (ckpt / "config.json").is_file():
        raise InputError(f"--checkpoint {ckpt}: no config.json there; expected a directory `depthprune prune --save` wrote")
    ck_config = read_json(ckpt / "config.json")
    ck_config = ck_config.get("text_config") or ck_config
    removed = tuple(sorted(int(i) for i in ck_config.get("depthprune_removed_layers") or ()))
    if not removed:
        raise InputError(f"--checkpoint {ckpt}: its config.json has no depthprune_removed_layers; expected a pruned "
                         "checkpoint written by `depthprune prune --save`")
    if int(ck_config.get("num_hidden_layers", -1)) + len(removed) != n:
        raise InputError(f"--checkpoint {ckpt}: {ck_config.get('num_hidden_layers')} blocks + {len(removed)} removed "
                         f"is not {spec.id}'s {n}; expected a checkpoint pruned from --model {spec.id}")
    _check_removed(removed, n, spec.id, f"--checkpoint {ckpt} (depthprune_removed_layers)")
    return Plan(spec.id, n, max_pos, removed, {"checkpoint": str(ckpt)}, checkpoint=str(ckpt))


def _model_limits(model: str, allow_download: bool) -> tuple[str, int, int | None]:
    """``(registry id, blocks, maximum positions)`` of ``model`` from its config alone."""
    from depthprune.model import WeightsUnavailable, gguf_file_in, locate, resolve

    try:
        spec = resolve(model)
        path = locate(spec, allow_download=allow_download)
    except WeightsUnavailable as err:
        raise InputError(f"--model {model}: {err}") from None
    except ValueError as err:
        raise InputError(f"--model: {err}") from None
    config = _config(path, gguf_file_in(spec, path))
    return spec.id, int(config.num_hidden_layers), getattr(config, "max_position_embeddings", None)


def cmd_speed_grid(args: argparse.Namespace) -> int:
    """``--results DIR --grid NAME``: every distinct removed set of the grid's cells, measured once per set."""
    from depthprune.common.jsonio import write_json_atomic
    from depthprune.model import load_model, resolve_device, resolve_dtype
    from depthprune.results.store import iter_results
    from depthprune.speed import cells, compare

    others = [f for f, v in (("--remove", args.remove), ("--checkpoint", args.checkpoint), ("--result", args.result),
                             ("--cost-table", args.cost_table or None)) if v is not None]
    if others:
        raise InputError(f"give exactly one of --remove, --checkpoint, --result, --cost-table, --results (got "
                         f"--results, {', '.join(others)})")
    if args.model or args.stand_in:
        raise InputError("--results takes its models from the results; drop --model/--stand-in")
    if not args.grid:
        raise InputError("--results takes --grid NAME (the grid whose cells to measure)")
    if not Path(args.results).is_dir():
        raise InputError(f"--results {args.results}: not a directory (of results, or archive/ with <grid>.jsonl.xz)")
    results = list(iter_results([args.results]))  # a broken file: ResultFileError, exit 2 naming it
    sets = cells.distinct_sets(results, args.grid)
    if not sets:
        grids = sorted({str(r.identity.grid) for r in results})
        raise InputError(f"--grid {args.grid}: no pruned cells of that grid in {args.results}; "
                         f"grids there: {', '.join(grids) or 'none'}")
    plans = {}
    for model_id, by_set in sets.items():
        rid, n, max_pos = _model_limits(model_id, args.allow_download)
        for removed in by_set:
            _check_removed(removed, n, rid, f"--results {args.results} (a result of {rid}, field 'removed')")
        plans[model_id] = Plan(rid, n, max_pos, (), {})
    spans = {m: contexts_for(args, plan) for m, plan in plans.items()}
    try:
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
    except ValueError as err:
        raise InputError(f"--device/--dtype: {err}") from None
    if not args.json:
        raise InputError("--results writes its archive to --json FILE (e.g. archive/speed-<grid>.json)")
    check_destination(args.json, "--json")

    def load(model_id: str) -> Any:
        return load_model(model_id, device=device, dtype=args.dtype, allow_download=args.allow_download)[0]

    with threads(args.threads):
        machine = compare.machine(device, dtype)  # with the threads it measures with
    settings = {"grid": args.grid, "results": str(args.results), "rounds": args.rounds, "warmup": args.warmup,
                "new_tokens": args.new_tokens, "contexts": {m: list(c) for m, c in spans.items()},
                "threads": args.threads, "machine": {k: v for k, v in machine.items() if k != "git_revision"}}
    try:
        journal = cells.Journal.beside(args.json, settings)
    except ValueError as err:
        raise InputError(str(err)) from None
    with threads(args.threads):
        rows = cells.measure_sets(sets, load, spans.__getitem__, args.new_tokens, args.rounds, args.warmup, device,
                                  progress=not args.quiet, journal=journal)
    for row in rows:
        shown = "  ".join(f"{w} {v['speedup']['median']:.3f}" for w, v in row["measured"].items())
        print(f"{row['model']:<14} -{','.join(map(str, row['removed'])):<24} {len(row['cells']):>2} cells  {shown}  "
              f"L/(L-M) {row['predicted']['blocks_only']:.3f}")
    record = cells.grid_record(args.grid, rows, args.rounds, args.warmup, machine,
                               " ".join(["depthprune", *sys.argv[1:]]))
    write_json_atomic(args.json, record)
    journal.close()
    print(f"wrote      {args.json} ({len(rows)} removed sets of {sum(len(r['cells']) for r in rows)} cells)")
    return 0


def contexts_for(args: argparse.Namespace, plan: Plan) -> tuple[int, int]:
    """``(short, long)``: the flag's, else the shipped cost table's, else 64 and 512 (capped by the model)."""
    from depthprune.speed.costs import load_table

    if args.contexts is not None:
        if len(args.contexts) != 2 or args.contexts[0] > args.contexts[1]:
            raise InputError(f"--contexts {','.join(map(str, args.contexts))}: expected SHORT,LONG with SHORT <= LONG")
        short, long = args.contexts
        if plan.max_positions is not None and long > plan.max_positions:
            raise InputError(f"--contexts: {long} tokens is longer than {plan.model_id}'s maximum of "
                             f"{plan.max_positions} positions; allowed: up to {plan.max_positions}")
        return short, long
    table = None if plan.stand_in is not None else load_table(plan.model_id)
    if table is not None:
        return int(table["contexts"][0]), int(table["contexts"][1])
    cap = plan.max_positions or DEFAULT_CONTEXTS[1]
    return min(DEFAULT_CONTEXTS[0], cap), min(DEFAULT_CONTEXTS[1], cap)


def _load(plan: Plan, args: argparse.Namespace, device: str, long: int) -> tuple[Any, Any]:
    """The dense model and the rebuilt pruned one (or a loaded pruned checkpoint); None for the pruned one of a cost-table run."""
    import torch

    from depthprune.model import load_model, resolve_dtype
    from depthprune.speed.compare import rebuild

    if plan.stand_in is not None:
        from depthprune.plan.device_phases import build_model

        dense = build_model(plan.stand_in, device, long).to(resolve_dtype(args.dtype, device))
        dense.config.use_cache = True
    else:
        dense, _ = load_model(plan.model_id, device=device, dtype=args.dtype, allow_download=args.allow_download)
    if args.cost_table:
        return dense, None
    if plan.checkpoint:
        from transformers import AutoModelForCausalLM

        dtype = next(dense.parameters()).dtype
        pruned = AutoModelForCausalLM.from_pretrained(plan.checkpoint, dtype=dtype, attn_implementation=
                                                      dense.config._attn_implementation).to(device).eval()
        return dense, pruned
    with torch.no_grad():
        return dense, rebuild(dense, plan.removed)


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``n`` for the block (None: left as they are), then restored, so an
    in-process ``main([...])`` leaves the caller's setting alone."""
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cmd_speed(args: argparse.Namespace) -> int:
    """``depthprune speed``: check everything the flags and configs allow (exit 2), then measure."""
    from depthprune.model import resolve_device, resolve_dtype

    # -- validate: everything that can be checked before loading weights (exit 2) --------
    if args.results is not None:
        return cmd_speed_grid(args)
    plan = plan_run(args)
    short, long = contexts_for(args, plan)
    try:
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
    except ValueError as err:
        raise InputError(f"--device/--dtype: {err}") from None
    if args.cost_table and not args.out:
        raise InputError("--cost-table writes its table to --out FILE (e.g. src/depthprune/assets/speed/<model>.json)")
    if args.out and not args.cost_table:
        raise InputError("--out is the cost table's destination; with --remove, --checkpoint or --result use --json")
    check_destination(args.json, "--json")
    check_destination(args.out, "--out")

    # -- run (a failure here exits 1) -------------------------------------------------------
    with threads(args.threads):
        return _run(args, plan, device, dtype, (short, long))


def _run(args: argparse.Namespace, plan: Plan, device: str, dtype: Any, spans: tuple[int, int]) -> int:
    """Load, measure, print and write (``cmd_speed`` after its checks)."""
    from depthprune.common.jsonio import write_json_atomic
    from depthprune.speed import compare, costs
    from depthprune.speed.timing import workloads

    short, long = spans
    dense, pruned = _load(plan, args, device, long)
    progress = not args.quiet
    if args.cost_table:
        table = costs.measure_table(dense, plan.model_id, (short, long), args.new_tokens, args.rounds, args.warmup,
                                    device, progress=progress)
        machine = compare.machine(device, dtype)
        table.update(machine=machine, revision=machine["git_revision"], command=" ".join(["depthprune", *sys.argv[1:]]))
        for phase, ph in table["phases"].items():
            per = ", ".join(f"{t} {s * 1e3:.3f} ms" for t, s in ph["block_s"].items())
            print(f"{phase:<14} fixed {ph['fixed_s'] * 1e3:.3f} ms; per block: {per}")
        write_json_atomic(args.out, table)
        print(f"wrote      {args.out}")
        return 0
    table = None if plan.stand_in is not None else costs.load_table(plan.model_id)
    works = workloads((short, long), args.batches, args.new_tokens)
    record = compare.measure(dense, pruned, plan.removed, works, args.rounds, args.warmup, device, table, progress)
    record.update(model=plan.model_id, source=plan.source, dtype=str(dtype).removeprefix("torch."),
                  stand_in=None if plan.stand_in is None else plan.stand_in.model,
                  rebuilt="loaded checkpoint" if plan.checkpoint else "deep copy + depthprune.model.masking.prune_layers",
                  machine=compare.machine(device, dtype))
    print(f"model      {plan.model_id}{' (random-weight stand-in)' if plan.stand_in else ''} on {device}, "
          f"{record['dtype']}, {args.rounds} rounds after {args.warmup} warm-up")
    for line in compare.summary_lines(record):
        print(line)
    if args.json:
        write_json_atomic(args.json, record)
        print(f"wrote      {args.json}")
    return 0


def register(sub: Any) -> None:
    """Add ``speed`` to the ``depthprune`` subparsers ``sub``."""
    p = sub.add_parser("speed", help="the pruned model's measured inference speed against the dense one, "
                                     "beside L/(L-M) and the cost table's prediction")
    p.add_argument("--model", default=None, help="registry id (e.g. tiny-llama3, gemma3-270m), local dir or Hub id")
    p.add_argument("--remove", type=layers_arg, default=None, metavar="I,J,K", help="blocks to remove")
    p.add_argument("--checkpoint", default=None, metavar="DIR", help="a pruned checkpoint (`prune --save`) of --model")
    p.add_argument("--result", default=None, metavar="FILE", help="a cell's result file: its removed set")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="a results directory (or archive/): every distinct removed set of --grid's cells, once")
    p.add_argument("--grid", default=None, help="the grid whose cells --results measures (e.g. tiny)")
    p.add_argument("--cost-table", action="store_true", help="measure --model's per-block cost table into --out")
    p.add_argument("--out", default=None, metavar="FILE", help="the cost table's destination (with --cost-table)")
    p.add_argument("--stand-in", default=None, metavar="SHAPE",
                   help="random weights at a shape instead of --model (e.g. llama3.1-8b, smollm2-135m, tiny-64)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    p.add_argument("--allow-download", action="store_true", help="let transformers fetch missing weights from the Hub")
    p.add_argument("--contexts", type=ints_arg, default=None, metavar="SHORT,LONG",
                   help="prefill contexts in tokens (default: the shipped cost table's, else 64,512)")
    p.add_argument("--batches", type=ints_arg, default=(1, 4), metavar="B1,B2", help="batch sizes (default 1,4)")
    p.add_argument("--new-tokens", type=positive(1), default=16, help="decode steps after the short prompt (default 16)")
    p.add_argument("--rounds", type=positive(1), default=5, help="timed rounds per workload (default 5)")
    p.add_argument("--warmup", type=positive(0), default=1, help="untimed rounds first (default 1)")
    p.add_argument("--threads", type=positive(1), default=None,
                   help="CPU threads for torch (default: torch's; 1 gives steadier numbers on a shared machine)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the measurement as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_speed)
