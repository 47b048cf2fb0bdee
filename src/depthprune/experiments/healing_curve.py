"""The healing curve: what a heal recovers against its token budget, and the budget a grid's heals use.

    depthprune measure healing-curve --grid tiny --out curves/healing-tiny     # resumable; curve.json
    (tox -e heal-tiny runs it before the grid's heals)

THE RULE, written before any curve ran (DESIGN.md, "Healing"):

* sets: per model, the grid's one-shot sets at its largest budget under ppl and under margin (two sets a model;
  one where both objectives chose the same);
* points: every doubling from 2^12 tokens to the cap, each a heal of its own (the schedule depends on the
  budget), evaluated with the grid's evaluation, in float32, beside the set unhealed and the dense model;
* the cap: the largest power of two at which the grid's heals (every distinct set, the dense control, the
  second seed's subset; :func:`depthprune.healing.grid_heals.plan_jobs`) and their two evaluations each fit the
  grid's time limit (``--limit``: tiny 45 min, real 6 h) at the heal throughput and evaluation time this curve
  measures at its first point;
* the budget: with g(T) the mean over the sets of log C4 ppl healed at T minus the dense model's, and
  r(T) = (g(T) - g(2T)) / g(T) the share of the gap left that one more doubling recovers, the first T where
  r(T) < 10% while the returns diminish, r(T) <= r(T/2), or where g(T) <= 0; the cap where no point qualifies.
  (Revised 2026-12-07, after the tiny curve was read: as first written it took the first r(T) < 10% and so
  picked 4,096 tokens, four optimizer steps, on a curve whose every doubling recovered more than the one
  before. Its premise, returns that diminish from the first point, is now a condition it checks. DESIGN.md.)

Each point is journaled (``points/<model>-<set>-t<T>.json``, written when its evaluation is done): a stopped
curve resumes with the points left.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json, write_json_atomic
from depthprune.healing.budget import choose_budget

START_TOKENS = 2 ** 12
#: the rule's revision (module docstring) and the grids whose curves were read before it: their budgets under
#: it are not blind choices, and REPORT says so
REVISION = {"date": "2026-12-07", "what": "the share must have stopped growing, r(T) <= r(T/2)",
            "curves_read_before": ["tiny"]}
LIMITS = {"tiny": 45 * 60, "real": 6 * 3600}


def curve_sets(results: Sequence[Any], grid: str) -> dict[str, list[tuple[int, ...]]]:
    """Per model, the grid's one-shot sets at its largest budget under ppl and margin (distinct, sorted)."""
    rows = [r for r in results if r.identity.grid == grid and r.identity.heal is None]
    out: dict[str, list[tuple[int, ...]]] = {}
    for model in sorted({r.identity.model for r in rows}):
        mine = [r for r in rows if r.identity.model == model and r.identity.search == "oneshot"]
        if not mine:
            continue
        top = max(r.identity.budget for r in mine)
        sets = {tuple(sorted(r["removed"])) for r in mine if r.identity.budget == top
                and r.identity.objective in ("ppl", "margin") and r.identity.variant == "default"}
        out[model] = sorted(sets)
    return out


def gap(c4_ppl: float, dense_c4_ppl: float) -> float:
    return math.log(c4_ppl) - math.log(dense_c4_ppl)


def cap_tokens(n_jobs: int, tokens_per_second: float, eval_seconds: float, limit_s: float,
               start: int = START_TOKENS) -> int:
    """The largest power of two >= ``start`` whose ``n_jobs`` heals, each with two evaluations, fit ``limit_s``."""
    t = start
    while n_jobs * ((2 * t) / tokens_per_second + 2 * eval_seconds) <= limit_s:
        t *= 2
    return t


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", required=True, help="the grid whose sets are healed (tiny, real)")
    p.add_argument("--from", dest="source", action="append", default=None, metavar="DIR",
                   help="its unhealed results (default: archive)")
    p.add_argument("--out", required=True, help="the curve's folder (points/, curve.json)")
    p.add_argument("--limit", type=float, default=None, help="the grid heal's time limit in seconds (default: tiny "
                   "45 min, real 6 h)")
    p.add_argument("--archive", metavar="DIR", default=None,
                   help="also copy curve.json to DIR/healing-curve-<grid>.json, where depthprune report reads it")
    p.add_argument("--models", default=None, help="only these models, comma-separated")
    p.add_argument("--quiet", action="store_true")


def _point(out: Path, model: str, removed: tuple[int, ...], tokens: int) -> Path:
    return out / "points" / f"{model}-{'_'.join(map(str, removed)) or 'dense'}-t{tokens}.json"


def run(args: argparse.Namespace) -> int:
    from depthprune.common.errors import InputError
    from depthprune.healing.grid_heals import PAPER_SEARCHERS, distinct_sets, eval_config_of, plan_jobs
    from depthprune.results.store import iter_results

    sources = [Path(s) for s in (args.source or ["archive"])]
    results = [r for r in iter_results(sources) if r.identity.grid == args.grid and r["evaluated"]]
    if not results:
        raise InputError(f"--grid {args.grid}: no evaluated results under {', '.join(map(str, sources))}")
    sets = curve_sets(results, args.grid)
    if args.models:
        sets = {m: s for m, s in sets.items() if m in args.models.split(",")}
    limit = args.limit if args.limit is not None else LIMITS.get(args.grid)
    if limit is None:
        raise InputError(f"--limit: grid {args.grid!r} has no default time limit; give one in seconds")
    out = Path(args.out)
    n_jobs = len(plan_jobs(distinct_sets([r for r in results if r.identity.search in PAPER_SEARCHERS])))
    summary: dict[str, Any] = {"grid": args.grid, "rule": __doc__.split("THE RULE")[1].split("Each point")[0].strip(),
                               "sets": {m: [list(s) for s in v] for m, v in sets.items()}, "jobs": n_jobs,
                               "revision": REVISION, "limit_s": limit, "points": []}
    cap: int | None = None
    model_seconds: dict[str, float] = {}  # per model: its points' heals and evaluations, the dense one's included
    start = time.perf_counter()
    for model, model_sets in sets.items():
        first = next(r for r in results if r.identity.model == model)
        points = _ModelPoints(model, first.identity.profile, eval_config_of(first), out, args.quiet)
        dense = points.point((), 0)
        model_seconds[model] = _seconds(dense)
        for removed in model_sets:
            p = points.point(removed, 0)
            model_seconds[model] += _seconds(p)
            summary["points"].append({**_brief(p), "dense_c4_ppl": dense["metrics"]["c4_ppl"]})
            tokens = START_TOKENS
            while cap is None or tokens <= cap:
                p = points.point(removed, tokens)
                model_seconds[model] += _seconds(p)
                summary["points"].append({**_brief(p), "dense_c4_ppl": dense["metrics"]["c4_ppl"]})
                if cap is None:
                    cap = cap_tokens(n_jobs, p["tokens_per_second"], p["eval_seconds"], limit)
                    summary.update(cap=cap, cap_from={"tokens_per_second": p["tokens_per_second"],
                                                      "eval_seconds": p["eval_seconds"]})
                tokens *= 2
        points.close()
    by_tokens: dict[int, list[float]] = {}
    for p in summary["points"]:
        if p["tokens"] > 0:
            by_tokens.setdefault(p["tokens"], []).append(gap(p["c4_ppl"], p["dense_c4_ppl"]))
    gaps = {t: sum(v) / len(v) for t, v in by_tokens.items() if len(v) == sum(len(s) for s in sets.values())}
    budget, why = choose_budget(gaps, cap or START_TOKENS)
    # seconds: this invocation's wall time (a resumed curve reads its points from the journal); points_seconds:
    # the points' own heals and evaluations, each timed when it ran, whichever run that was
    points_seconds = sum(_seconds(p) for p in summary["points"])
    summary.update(mean_gap={str(t): g for t, g in sorted(gaps.items())}, budget=budget, why=why,
                   seconds=round(time.perf_counter() - start, 1), points_seconds=round(points_seconds, 1),
                   model_seconds={m: round(v, 1) for m, v in model_seconds.items()})
    write_json_atomic(out / "curve.json", summary)
    if args.archive:
        write_json_atomic(Path(args.archive) / f"healing-curve-{args.grid}.json", summary)
    print(f"healing curve {args.grid}: budget {budget} tokens ({why}); cap {cap}; {len(summary['points'])} points "
          f"in {summary['seconds']:.0f} s; per model, its points' heals and evaluations: "
          + ", ".join(f"{m} {v / 60:.1f} min" for m, v in summary["model_seconds"].items()))
    for t, g in sorted(gaps.items()):
        print(f"  {t:>8} tokens: mean log C4 ppl gap to dense {g:.4f}")
    return 0


class _ModelPoints:
    """One model's points: each read from its journal file, or measured (the model loaded once, when first
    needed) and journaled."""

    def __init__(self, model: str, profile: str, eval_cfg: Any, out: Path, quiet: bool) -> None:
        from depthprune.data.healing_text import healing_fingerprint, healing_texts

        self.model, self.profile, self.eval_cfg, self.out, self.quiet = model, profile, eval_cfg, out, quiet
        self.texts, self.data = healing_texts(profile), healing_fingerprint(profile)
        self.session: Any = None

    def point(self, removed: tuple[int, ...], tokens: int) -> dict[str, Any]:
        from depthprune.healing.config import HealConfig
        from depthprune.healing.pruned import evaluate_healed, evaluate_unhealed, heal_removed
        from depthprune.recipe import Session

        path = _point(self.out, self.model, removed, tokens)
        if path.is_file():
            return dict(read_json(path))
        if self.session is None:
            self.session = Session.open(self.model, profile=self.profile, device="cpu", dtype="float32")
        s = self.session
        record: dict[str, Any] = {"model": self.model, "removed": list(removed), "tokens": tokens}
        if tokens == 0:
            ev = evaluate_unhealed(s, removed, self.eval_cfg)
        else:
            cfg = HealConfig(tokens=tokens)
            healed, report = heal_removed(s, removed, cfg, self.texts, self.data,
                                          progress=False if self.quiet else f"{self.model} {removed} {tokens}")
            ev = evaluate_healed(s, healed, report, self.eval_cfg)
            record.update(heal_seconds=report.seconds, tokens_per_second=report.tokens_per_second,
                          losses=report.losses)
        record.update(metrics=ev.metrics, item_outcomes=ev.items, window_nll=ev.windows, eval_seconds=ev.seconds)
        write_json_atomic(path, record)
        return record

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def _seconds(p: Mapping[str, Any]) -> float:
    """A point's own heal and evaluation, timed when it ran (whichever run of a resumed curve that was)."""
    return (p.get("heal_seconds") or 0.0) + (p.get("eval_seconds") or 0.0)


def _brief(p: Mapping[str, Any]) -> dict[str, Any]:
    m = p["metrics"]
    return {"model": p["model"], "removed": p["removed"], "tokens": p["tokens"], "c4_ppl": m.get("c4_ppl"),
            "avg_acc": m.get("avg_acc"), "heal_seconds": p.get("heal_seconds"), "eval_seconds": p.get("eval_seconds"),
            "tokens_per_second": p.get("tokens_per_second")}
