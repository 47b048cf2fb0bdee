"""``depthprune heal`` and the heal flags of ``depthprune prune --heal``: a pruned model fine-tuned to recover.

Everything a heal can get wrong is checked before a model loads (exit 2, nothing written): the flags' ranges,
the target modules against the architecture's config (a model skeleton on the meta device), the healing
data against its manifest's sha256, and the checkpoint directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from depthprune.cli.common import (
    add_model_args,
    check_destination,
    layers_arg,
    model_spec,
    positive,
    tasks_arg,
)
from depthprune.common import layout
from depthprune.common.errors import InputError


def _fraction0(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def add_heal_args(p: argparse.ArgumentParser) -> None:
    """The heal's flags (``heal`` and ``prune --heal``); their defaults are :class:`~depthprune.healing.config.HealConfig`'s, with sources."""
    from depthprune.healing.config import METHODS, SCHEDULES, SOURCES, HealConfig

    d = HealConfig(tokens=1)

    def source(key: str) -> str:  # argparse formats help with %: a source's "5%" must be "5%%"
        return SOURCES[key].replace("%", "%%")

    g = p.add_argument_group("healing (LoRA through PEFT, in float32; defaults: docs/healing.md)")
    g.add_argument("--heal-tokens", type=positive(1), default=None, metavar="N",
                   help="training tokens in all (the budget; default: the profile's chosen budget)")
    g.add_argument("--heal-method", choices=METHODS, default=d.method, help=source("method"))
    g.add_argument("--lora-rank", type=positive(1), default=d.rank, help=source("rank"))
    g.add_argument("--lora-alpha", type=positive(1), default=d.alpha, help=source("alpha"))
    g.add_argument("--lora-dropout", type=_fraction0, default=d.dropout, help=source("dropout"))
    g.add_argument("--lora-targets", type=tasks_arg, default=(), metavar="NAME,NAME",
                   help="the blocks' linear layers to adapt, by name (default: every one; " + source("target_modules") + ")")
    g.add_argument("--heal-lr", type=_positive_float, default=d.lr, help=source("lr"))
    g.add_argument("--heal-schedule", choices=SCHEDULES, default=d.schedule, help=source("schedule"))
    g.add_argument("--heal-warmup", type=_fraction0, default=d.warmup_ratio, help=source("warmup_ratio"))
    g.add_argument("--heal-seq-len", type=positive(2), default=d.seq_len, help=source("seq_len"))
    g.add_argument("--heal-batch-size", type=positive(1), default=d.batch_size, help=source("batch_size"))
    g.add_argument("--heal-seed", type=positive(0), default=d.seed, help="the heal's seed (adapters, dropout, window order)")


def heal_config(args: argparse.Namespace, profile: str) -> Any:
    """The :class:`~depthprune.healing.config.HealConfig` the flags ask for; the budget defaults to the profile's chosen one."""
    from depthprune.healing.config import BUDGETS, HealConfig

    tokens = args.heal_tokens if args.heal_tokens is not None else BUDGETS.get(profile)
    if tokens is None:
        raise InputError(f"--heal-tokens: no budget has been chosen for profile {profile!r} "
                         f"(chosen: {', '.join(f'{k} {v}' for k, v in BUDGETS.items()) or 'none'}); give one")
    try:
        return HealConfig(tokens=tokens, method=args.heal_method, rank=args.lora_rank, alpha=args.lora_alpha,
                          dropout=args.lora_dropout, target_modules=tuple(args.lora_targets), lr=args.heal_lr,
                          schedule=args.heal_schedule, warmup_ratio=args.heal_warmup, seq_len=args.heal_seq_len,
                          batch_size=args.heal_batch_size, seed=args.heal_seed)
    except ValueError as err:
        raise InputError(f"--heal-*: {err}") from None


def check_heal_inputs(spec: Any, cfg: Any, profile: str, allow_download: bool) -> tuple[list[str], dict[str, Any]]:
    """The checks a heal makes before anything loads: its targets exist in the architecture, its data is
    intact. Returns the healing texts and their fingerprint."""
    from depthprune.data.healing_text import healing_fingerprint, healing_texts
    from depthprune.healing.lora import resolve_targets
    from depthprune.model.loading import block_linear_kinds, read_config

    try:
        resolve_targets(block_linear_kinds(read_config(spec, allow_download)), cfg.target_modules)
    except ValueError as err:
        raise InputError(f"--lora-targets: {err}") from None
    return healing_texts(profile), healing_fingerprint(profile)


def cmd_heal(args: argparse.Namespace) -> int:
    from depthprune.common.jsonio import write_json_atomic

    spec = model_spec(args.model)
    profile = args.profile or spec.profile
    if args.dtype not in ("auto", "float32"):
        raise InputError(f"--dtype {args.dtype}: a heal runs in float32 on every machine, so heals compare; "
                         "allowed: auto, float32")
    cfg = heal_config(args, profile)
    check_destination(args.save, "--save", kind="dir", overwrite=args.overwrite)
    check_destination(args.json, "--json")
    from depthprune.recipe import count_layers

    n_layers = count_layers(spec, args.allow_download)
    bad = [i for i in args.remove if not 0 <= i < n_layers]
    if bad or len(args.remove) >= n_layers:
        raise InputError(f"--remove {','.join(map(str, args.remove))}: {spec.id} has {n_layers} layers; "
                         f"allowed 0..{n_layers - 1}, at least one kept")
    texts, data = check_heal_inputs(spec, cfg, profile, args.allow_download)

    from depthprune.healing.pruned import evaluate_healed, heal_removed, save_healed
    from depthprune.recipe import Session

    session = Session.open(spec, profile=profile, device=args.device, dtype="float32",
                           allow_download=args.allow_download)
    model, report = heal_removed(session, args.remove, cfg, texts, data, in_place=True,
                                 progress=False if args.quiet else "heal")
    print(f"healed     {spec.id} without {','.join(map(str, args.remove)) or 'nothing'}: {cfg.tag}, "
          f"{report.steps} steps, {report.tokens} tokens in {report.seconds:.1f} s "
          f"({report.tokens_per_second:.0f} tokens/s); loss {report.losses[0]:.4f} -> {report.losses[-1]:.4f}")
    print(f"merge      max |merged - unmerged| logit {report.merge_max_abs_diff:.3g} "
          f"(largest |logit| {report.merge_max_abs_logit:.3g})")
    out: dict[str, Any] = {"model": spec.id, "weights": session.weights, "removed": list(args.remove),
                           "healing": report.to_dict(), "healing_data": data}
    if args.evaluate:
        cfg_eval = session.profile.eval_config()
        evaluation = evaluate_healed(session, model, report, cfg_eval)
        out.update(metrics=evaluation.metrics, item_outcomes=evaluation.items, window_nll=evaluation.windows,
                   evaluation_protocol=evaluation.protocol)
        shown = [f"{k} {v:.4f}" for k, v in evaluation.metrics.items() if k in ("wikitext2_ppl", "c4_ppl", "avg_acc")]
        print(f"metrics    {', '.join(shown)}")
    if args.json:
        write_json_atomic(args.json, out)
        print(f"wrote      {args.json}")
    if args.save:
        path = save_healed(session, model, out, args.save)
        print(f"saved      {path} ({n_layers - len(args.remove)} layers, merged)")
    return 0


def _case_grid(cases: str, name: str) -> Any:
    """The grid ``name`` of the case files in ``cases`` (its [heal] table and device), or None where there is none."""
    from depthprune.grid.cases import CaseFileError, load_grids

    if not Path(cases).is_dir():
        return None
    try:
        return next((g for g in load_grids(cases) if g.name == name), None)
    except CaseFileError as err:
        raise InputError(str(err)) from None


def cmd_heal_grid(args: argparse.Namespace) -> int:
    from depthprune.results.store import iter_dense, iter_results

    sources = [Path(p) for p in args.source or [layout.ARCHIVE]]
    for path in sources:
        if not path.exists():
            raise InputError(f"--from {path}: no such results directory or archive folder")
    results = [r for r in iter_results(sources) if r.identity.grid == args.grid]
    if not results:
        grids = sorted({r.identity.grid or "" for r in iter_results(sources)})
        raise InputError(f"--grid {args.grid}: no results of it under {', '.join(map(str, sources))}; "
                         f"allowed: {', '.join(grids) or 'none found'}")
    profiles = sorted({r.identity.profile for r in results})
    case = _case_grid(args.cases, args.grid)
    if case is not None and case.heal and args.heal_tokens is None and args.budget_from is None:
        defaults = {**vars(args), "heal_tokens": case.heal["tokens"]}
        for key, flag in (("method", "heal_method"), ("rank", "lora_rank"), ("alpha", "lora_alpha"),
                          ("dropout", "lora_dropout"), ("lr", "heal_lr"), ("schedule", "heal_schedule"),
                          ("warmup_ratio", "heal_warmup"),
                          ("seq_len", "heal_seq_len"), ("batch_size", "heal_batch_size"), ("seed", "heal_seed"),
                          ("target_modules", "lora_targets")):
            if key in case.heal:
                defaults[flag] = case.heal[key]
        args = argparse.Namespace(**defaults)
    device = args.device or (case.device if case is not None and case.device != "auto" else "cpu")
    if args.budget_from is not None:
        if args.heal_tokens is not None:
            raise InputError("--budget-from and --heal-tokens: give one budget, not two")
        from depthprune.common.jsonio import JSONFileError, read_json

        try:
            args.heal_tokens = int(read_json(args.budget_from)["budget"])
        except (OSError, JSONFileError, KeyError, TypeError, ValueError) as err:
            raise InputError(f"--budget-from {args.budget_from}: no healing curve's budget there ({err})") from None
    cfg = heal_config(args, profiles[0])
    models = sorted({r.identity.model for r in results})
    unknown = sorted(set(args.models or ()) - set(models))
    if unknown:
        raise InputError(f"--models {','.join(unknown)}: not in grid {args.grid}; allowed: {', '.join(models)}")
    from depthprune.model import resolve

    for model in args.models or models:
        check_heal_inputs(resolve(model), cfg, profiles[0], False)
    check_destination(args.results, "--results", kind="dir")
    dense = {d["model"]: d for d in iter_dense(sources) if d.get("grid") == args.grid}

    from depthprune.healing.grid_heals import heal_grid

    done = heal_grid(results, dense, args.grid, cfg, args.results, models=args.models,
                     second_seed=None if args.second_seed < 0 else args.second_seed, second_every=args.second_every,
                     device=device, progress=not args.quiet,
                     searchers=None if args.searchers == ("all",) else args.searchers)
    print(f"heal-grid  {args.grid}: {done['jobs']} heals ({done['resumed']} already in the journal, {done['run']} run); "
          f"{done['written']} healed results under {Path(args.results) / (args.grid + '-healed')}")
    return 0


def register(sub: Any) -> None:
    from depthprune.healing.grid_heals import PAPER_SEARCHERS

    p = sub.add_parser("heal", help="fine-tune a model without some blocks (LoRA, merged) and save a checkpoint")
    add_model_args(p)
    p.add_argument("--remove", type=layers_arg, default=(), metavar="I,J,K",
                   help="blocks to remove before healing (default none: e.g. a checkpoint `prune --save` wrote)")
    add_heal_args(p)
    p.add_argument("--evaluate", action="store_true", help="evaluate the healed model (the profile's evaluation)")
    p.add_argument("--save", default=None, metavar="DIR", help="write the healed, merged checkpoint here")
    p.add_argument("--overwrite", action="store_true", help="allow --save into a non-empty directory")
    p.add_argument("--json", default=None, metavar="FILE", help="write the heal's record (and metrics) as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_heal)

    p = sub.add_parser("heal-grid", help="heal each distinct removed set of a grid once, with controls (journaled)")
    p.add_argument("--grid", required=True, help="the grid whose results are healed (e.g. tiny, real)")
    p.add_argument("--from", dest="source", action="append", default=None, metavar="DIR",
                   help="where its unhealed results are: a results directory or archive/ (repeatable; default archive)")
    p.add_argument("--results", default="results", help="where <grid>-healed/ goes (default: ./results)")
    p.add_argument("--models", type=tasks_arg, default=None, metavar="M,M", help="only these models of the grid")
    p.add_argument("--searchers", type=tasks_arg, default=PAPER_SEARCHERS, metavar="S,S",
                   help="whose sets are healed (default: the paper's seven; 'all': the rank panel's too)")
    p.add_argument("--second-seed", type=int, default=1, help="the control seed (-1: none)")
    p.add_argument("--second-every", type=positive(1), default=4,
                   help="the second seed heals every N-th distinct set of a model, in sorted order (and its dense model)")
    p.add_argument("--cases", default=layout.CASES,
                   help="case files: the grid's [heal] table gives the settings no flag gives (default: ./cases)")
    p.add_argument("--device", default=None, help="cpu | cuda (default: the grid's device in its case file, else cpu)")
    p.add_argument("--budget-from", default=None, metavar="CURVE",
                   help="the token budget a healing curve chose (its curve.json), in place of --heal-tokens")
    add_heal_args(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_heal_grid)
