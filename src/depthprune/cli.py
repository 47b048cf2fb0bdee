"""``depthprune`` command line: prune, evaluate, grid, report.

Bad input exits with status 2 and one line naming the input and what is allowed,
before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


class UsageError(ValueError):
    """Bad command-line input."""


def _layers_arg(text: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices like 3,7,9, got {text!r}") from None


def _kv_arg(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="registry id (e.g. tiny-llama3, llama3-8b), local dir or Hub id")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--dtype", default="auto", help="auto (bf16 on cuda, fp32 on cpu) | float32 | bfloat16 | float16")
    p.add_argument("--allow-download", action="store_true", help="let transformers fetch missing weights from the Hub")
    p.add_argument("--profile", choices=("paper", "tiny"), default=None,
                   help="data profile (default: the model's; local/Hub models use 'paper')")


def _writable_target(path: str | None, flag: str, overwrite: bool = True) -> None:
    if path is None:
        return
    p = Path(path)
    if p.exists() and p.is_dir() and flag == "--save" and any(p.iterdir()) and not overwrite:
        raise UsageError(f"{flag} {path}: directory exists and is not empty (pass --overwrite)")
    if p.exists() and flag == "--json" and p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory, expected a file path")
    parent = p.parent if flag == "--json" else (p if p.exists() else p.parent)
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {path}: {parent} is not writable")


def cmd_prune(args: argparse.Namespace) -> int:
    from depthprune.pruning import PruneConfig, check_config, prune, save_pruned
    from depthprune.env import write_json_atomic

    cfg = PruneConfig(
        model=args.model, objective=args.objective, search=args.search, budget=args.budget, seed=args.seed,
        device=args.device, dtype=args.dtype, calib_samples=args.calib_samples, seq_len=args.seq_len,
        batch_size=args.batch_size, search_params=dict(args.param or []), protected=args.protect or (),
        allow_download=args.allow_download, progress=not args.quiet, profile=args.profile,
    )
    _writable_target(args.save, "--save", overwrite=args.overwrite)
    _writable_target(args.json, "--json")
    check_config(cfg)
    run = prune(cfg)
    r = run.result
    stats = run.scorer.stats
    print(f"model      {run.spec.id} ({run.scorer.n_layers} layers)")
    print(f"objective  {cfg.objective}  dense loss {run.dense_loss:.6f}")
    print(f"search     {cfg.search}  budget {cfg.budget}  seed {cfg.seed}")
    print(f"removed    {','.join(map(str, r.removed))}")
    print(f"loss       {r.loss:.6f}  (+{r.loss - run.dense_loss:.6f} vs dense)")
    print(f"cost       {r.evaluations} evaluations, {stats.layer_forwards} layer-forwards, {r.seconds:.2f} s")
    if args.json:
        write_json_atomic(args.json, {**run.to_dict(), "config": asdict(cfg)})
        print(f"wrote      {args.json}")
    if args.save:
        out = save_pruned(run, args.save)
        print(f"saved      {out} ({run.scorer.n_layers - len(r.removed)} layers)")
    return 0


def _tasks_arg(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def cmd_evaluate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from tabulate import tabulate

    from depthprune.env import environment, write_json_atomic
    from depthprune.evaluate import EvalConfig, default_cache_dir, evaluate
    from depthprune.models import load_model, resolve
    from depthprune.pruning import count_layers

    spec = resolve(args.model)
    if args.profile:
        spec = replace(spec, profile=args.profile)
    n_layers = count_layers(spec, args.allow_download)
    removed = args.remove or ()
    bad = [i for i in removed if not 0 <= i < n_layers]
    if bad or len(removed) >= n_layers:
        raise UsageError(f"--remove {','.join(map(str, removed))}: {spec.id} has {n_layers} layers; "
                         f"allowed: fewer than {n_layers} distinct indices in 0..{n_layers - 1}")
    cfg = EvalConfig.for_profile(spec.profile, tasks=args.tasks, seq_len=args.seq_len, limit=args.limit,
                                 batch_size=args.batch_size, lambada=not args.no_lambada,
                                 perplexity=() if args.no_perplexity else None)
    _writable_target(args.json, "--json")
    model, tokenizer = load_model(spec, device=args.device, dtype=args.dtype, allow_download=args.allow_download)
    cache = None if args.no_cache else default_cache_dir()
    result = evaluate(model, tokenizer, spec.id, removed, spec.profile, cfg, cache_dir=cache)
    rows = [(k, f"{v:.4f}") for k, v in result.metrics.items() if not k.endswith("_stderr")]
    print(f"{spec.id} without layers [{','.join(map(str, removed))}] "
          f"({result.seconds:.1f} s{', cached' if result.cached else ''})")
    print(tabulate(rows, headers=("metric", "value"), tablefmt="github"))
    if args.json:
        write_json_atomic(args.json, {"model": spec.id, "removed": list(removed), "metrics": result.metrics,
                                      "protocol": result.protocol, "seconds": result.seconds,
                                      "environment": environment(str(next(model.parameters()).device),
                                                                 str(next(model.parameters()).dtype))})
        print(f"wrote {args.json}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    import time

    from depthprune.report import write_report

    for d in args.results:
        if not Path(d).is_dir():
            raise UsageError(f"--results {d}: not a directory")
    _writable_target(args.out, "--json")
    start = time.perf_counter()
    command = "depthprune report " + " ".join(f"--results {d}" for d in args.results) + f" --out {args.out}"
    out = write_report(args.results, args.out, args.figures, command=command)
    print(f"wrote {out} in {time.perf_counter() - start:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="depthprune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prune", help="find the blocks to remove; optionally save the smaller checkpoint")
    _add_model_args(p)
    p.add_argument("--objective", default="ppl", help="calibration objective (ppl, margin, kl)")
    p.add_argument("--search", default="greedy", help="searcher (oneshot, greedy, beam, ga, bo, cbo, fbs, exhaustive)")
    p.add_argument("--budget", type=int, required=True, help="number of blocks to remove (M)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--calib-samples", type=int, default=None, help="calibration windows (ppl/kl) or items (margin)")
    p.add_argument("--seq-len", type=int, default=None, help="calibration window length in tokens")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per forward micro-batch")
    p.add_argument("--param", type=_kv_arg, action="append", metavar="KEY=VALUE", help="searcher hyper-parameter")
    p.add_argument("--protect", type=_layers_arg, default=None, metavar="I,J", help="layers that may not be removed")
    p.add_argument("--save", default=None, metavar="DIR", help="write the pruned checkpoint here")
    p.add_argument("--overwrite", action="store_true", help="allow --save into a non-empty directory")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("evaluate", help="perplexity suite + zero-shot tasks of the model without some layers")
    _add_model_args(p)
    p.add_argument("--remove", type=_layers_arg, default=(), metavar="I,J,K", help="layers to remove (default none)")
    p.add_argument("--tasks", type=_tasks_arg, default=None,
                   help="comma-separated zero-shot tasks (default: hellaswag,winogrande,arc_easy,arc_challenge,piqa,boolq)")
    p.add_argument("--no-lambada", action="store_true", help="skip LAMBADA")
    p.add_argument("--no-perplexity", action="store_true", help="skip WikiText-2 / C4 perplexity")
    p.add_argument("--seq-len", type=int, default=None, help="perplexity window length (paper 2048; tiny 256)")
    p.add_argument("--limit", type=int, default=None, help="lm-eval items per task (default all)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--no-cache", action="store_true", help="ignore and do not write the evaluation cache")
    p.add_argument("--json", default=None, metavar="FILE", help="write metrics and protocol as JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("report", help="write REPORT.md (tables, Spearman, overlaps, figures, claims) from results")
    p.add_argument("--results", action="append", required=True, metavar="DIR",
                   help="a results directory (repeat to merge shards/machines)")
    p.add_argument("--out", default="REPORT.md")
    p.add_argument("--figures", default=None, metavar="DIR", help="where the PNGs go (default: figures/ beside --out)")
    p.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    from depthprune.data import DataUnavailable
    from depthprune.models import WeightsUnavailable

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ValueError, WeightsUnavailable, DataUnavailable, OSError) as err:
        if os.environ.get("DEPTHPRUNE_DEBUG"):
            raise
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"depthprune {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
