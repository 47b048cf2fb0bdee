"""The calibration-size curve: how the removed set settles as the calibration sample grows.

    depthprune measure calibration-curve run --out curves/smollm2-135m        # resumable
    depthprune measure calibration-curve summarize --out curves/smollm2-135m  # curve.json + table
    (tox -e calibration-curve runs both on smollm2-135m)

For each objective (ppl, margin), calibration seed s and size n, oneshot and greedy remove M
blocks of a real model; seed s draws its sample from shard ``s/3`` of the pool (``shard`` of
the objectives: every third document or record), so the three seeds' samples share no text.
Within a seed the samples of different sizes are independent draws of the same seeded sampler
(the ppl sampler draws its windows in sequence, so n windows are the first n of 2n). Every
found set is also scored on a *held-out* calibration sample: the next seed's (``(s+1) % 3``)
at the largest size, which says whether a small sample finds worse sets, not only other ones.

What is recorded per objective x searcher x size: the three seeds' removed sets, their mean
pairwise Jaccard (do disjoint samples agree?), each seed's Jaccard to its own set at the
largest size (has the set stopped moving?), and the loss over the dense model's, on the
sample itself and held out.

THE RULE that picks the size, written before any curve was run: for each objective, the
smallest n of the curve at which, for both searchers, (a) the mean over seeds of
J(S_s(n), S_s(n_max)) >= 0.75 (at M = 7 the sets then differ by at most one block on
average) and (b) the mean cross-seed Jaccard at n is at least that at n_max minus 0.1. n_max
meets both trivially; if only n_max does, the curve has not shown the sets settling and the
summary says so. The grid's cost at the chosen size is then checked against its time limit
(the caller's decision, stated in the case file).

Sizes (issue 23): 8, 16, 32, 64, 128, three seeds, on <= 1 h of 2 cores; the largest sizes are
shrunk before the seeds. Measured on smollm2 (bf16, AMX, 1 thread; a probe at sizes 8 and 16):
oneshot + greedy M=7 cost ~9.5 s per 128-token ppl window and ~1.7 s per margin item (the
WordNet items are short), so ppl at 128 alone would add ~1 h: ppl stops at 64, margin keeps 128.
The work is split into (objective, seed) tasks over the worker processes (each loads the model
once and keeps it), most expensive first.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json, write_json_atomic

DEFAULTS: dict[str, Any] = {
    "model": "smollm2-135m", "objectives": ("ppl", "margin"), "searchers": ("oneshot", "greedy"), "budget": 7,
    "seeds": (0, 1, 2), "sizes": {"ppl": (8, 16, 32, 64), "margin": (8, 16, 32, 64, 128)},
}
#: each objective's fixed settings: the real grid's data (the pool with room for three disjoint samples;
#: the WordNet tasks' train splits, cloze form) and the parameter that sets the size
OBJECTIVES: dict[str, dict[str, Any]] = {
    "ppl": {"size": "n_samples", "params": {"dataset": "calibration_pool", "seq_len": 128}},
    "margin": {"size": "n_items", "params": {"dataset": "commonsense170k", "answer": "cloze"}},
}
#: seconds per window or item of oneshot + greedy M=7 on smollm2, 1 thread (the probe above): orders the tasks
COST_PER_UNIT = {"ppl": 9.5, "margin": 1.7}
SETTLED_JACCARD = 0.75
CROSS_SEED_SLACK = 0.1


def objective_params(objective: str, seed: int, size: int, n_seeds: int) -> dict[str, Any]:
    spec = OBJECTIVES[objective]
    return {**spec["params"], spec["size"]: size, "seed": seed, "shard": f"{seed}/{n_seeds}"}


def run_name(objective: str, seed: int, size: int, searcher: str) -> str:
    return f"{objective}-s{seed}-n{size}-{searcher}.json"


def _write_json(path: Path, data: Any) -> None:
    write_json_atomic(path, data, indent=1, sort_keys=False)  # a stopped run loses at most the search in flight


def _log(objective: str, message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} {objective}] {message}", flush=True)


_SESSION: dict[str, Any] = {}  # this worker process's loaded model, kept across its tasks


def _session(model: str, threads: int, objective: str) -> Any:
    import torch

    from depthprune.recipe import Session

    if model not in _SESSION:
        torch.set_num_threads(threads)
        _SESSION[model] = Session.open(model)
        s = _SESSION[model]
        _log(objective, f"{model} loaded ({s.dtype}, {threads} thread(s)) in {s.load_seconds:.0f} s")
    return _SESSION[model]


def run_task(objective: str, seed: int, cfg: dict[str, Any], out: str, threads: int) -> float:
    """Every (size, searcher) run of one objective and seed, then its sets' held-out losses; returns seconds."""
    from depthprune.recipe import identity, make_result

    runs = Path(out) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    n_seeds = len(cfg["seeds"])
    sizes = cfg["sizes"][objective]
    start = time.perf_counter()
    session = _session(cfg["model"], threads, objective)
    for size in sizes:
        todo = [s for s in cfg["searchers"] if not (runs / run_name(objective, seed, size, s)).exists()]
        if not todo:
            continue
        calib = session.calibrate(objective, **objective_params(objective, seed, size, n_seeds))
        for searcher in todo:
            outcome = calib.search(searcher, cfg["budget"], seed=0)
            ident = identity(session, calib, searcher, cfg["budget"], 0, variant=f"n{size}-s{seed}",
                             grid="calibration-curve")
            result = make_result(session, calib, outcome, ident)
            _write_json(runs / run_name(objective, seed, size, searcher), result)
            _log(objective, f"seed {seed} n={size} {searcher}: removed {list(outcome.removed)} "
                            f"loss {result['calibration_loss'] - calib.dense_loss:+.4f} vs dense "
                            f"({outcome.cost['seconds']:.0f} s as if alone)")
        session.drop_calibrations()
    held_out = Path(out) / "held_out"
    held_out.mkdir(exist_ok=True)
    path = held_out / f"{objective}-s{seed}.json"
    if not path.exists():
        other = cfg["seeds"][(cfg["seeds"].index(seed) + 1) % n_seeds]
        sets = sorted({tuple(read_json(runs / run_name(objective, seed, n, s))["removed"])
                       for n in sizes for s in cfg["searchers"]})
        calib = session.calibrate(objective, **objective_params(objective, other, max(sizes), n_seeds))
        losses = {_set_key(s): calib.scorer(frozenset(s)) for s in sets}
        _write_json(path, {"found_with_seed": seed, "scored_on": {"seed": other, "size": max(sizes),
                                                                   "params": calib.objective.params()},
                           "dense_loss": calib.dense_loss, "losses": losses})
        session.drop_calibrations()
        _log(objective, f"held-out losses of seed {seed}'s {len(sets)} sets on seed {other}'s sample")
    return time.perf_counter() - start


def _set_key(removed: Any) -> str:
    """How a removed set names its held-out loss: ``"3,5,12"``."""
    return ",".join(map(str, removed))


def summarize(out: str | Path) -> dict[str, Any]:
    """curve.json from the runs: per objective x searcher x size the sets, Jaccards and losses; the chosen sizes."""
    from depthprune.report.analysis import jaccard, mean_pairwise_jaccard

    out = Path(out)
    cfg = read_json(out / "config.json")
    runs = {p.name: read_json(p) for p in sorted((out / "runs").glob("*.json"))}
    seeds = cfg["seeds"]
    rows = []
    for objective in cfg["objectives"]:
        held = {s: read_json(out / "held_out" / f"{objective}-s{s}.json") for s in seeds}
        largest = max(cfg["sizes"][objective])
        for searcher in cfg["searchers"]:
            final = {s: runs[run_name(objective, s, largest, searcher)]["removed"] for s in seeds}
            for size in cfg["sizes"][objective]:
                res = {s: runs[run_name(objective, s, size, searcher)] for s in seeds}
                sets = {s: r["removed"] for s, r in res.items()}
                rows.append({
                    "objective": objective, "searcher": searcher, "size": size,
                    "sets": {str(s): v for s, v in sets.items()},
                    "cross_seed_jaccard": mean_pairwise_jaccard(list(sets.values())),
                    "jaccard_to_largest": sum(jaccard(sets[s], final[s]) for s in seeds) / len(seeds),
                    "loss_delta": sum(r["calibration_loss"] - r["dense_calibration_loss"] for r in res.values())
                    / len(res),
                    "held_out_loss_delta": sum(held[s]["losses"][_set_key(sets[s])] - held[s]["dense_loss"]
                                               for s in seeds) / len(seeds),
                    "seconds": sum(r["cost"]["seconds"] for r in res.values()) / len(res),
                })
    provenance = {"code": sorted({r.get("settings", {}).get("code", "?") for r in runs.values()}),
                  "environment": next(iter(runs.values())).get("environment", {}), "runs": len(runs)}
    chosen = {}
    for objective in cfg["objectives"]:
        mine = [r for r in rows if r["objective"] == objective]
        sizes = cfg["sizes"][objective]
        top = {r["searcher"]: r["cross_seed_jaccard"] for r in mine if r["size"] == max(sizes)}
        ok = [n for n in sizes if all(
            r["jaccard_to_largest"] >= SETTLED_JACCARD and r["cross_seed_jaccard"] >= top[r["searcher"]] - CROSS_SEED_SLACK
            for r in mine if r["size"] == n)]
        n = min(ok)
        chosen[objective] = {"size": n, "settled_before_largest": n < max(sizes)}
    summary = {"written_by": "depthprune measure calibration-curve summarize", "config": cfg,
               "provenance": provenance,
               "rule": {"settled_jaccard": SETTLED_JACCARD, "cross_seed_slack": CROSS_SEED_SLACK,
                        "text": " ".join(__doc__.split("THE RULE")[1].split("\n\n")[0].split(":", 1)[1].split())},
               "rows": rows, "chosen": chosen}
    _write_json(out / "curve.json", summary)
    return summary


def table(summary: dict[str, Any]) -> str:
    from depthprune.common.text_tables import markdown_table

    rows = [[r["objective"], r["searcher"], r["size"], f"{r['cross_seed_jaccard']:.2f}", f"{r['jaccard_to_largest']:.2f}",
             f"{r['loss_delta']:+.3f}", f"{r['held_out_loss_delta']:+.3f}", f"{r['seconds']:.0f}",
             " ".join(",".join(map(str, v)) for v in r["sets"].values())] for r in summary["rows"]]
    head = ["objective", "searcher", "size", "J across seeds", "J to own largest", "loss - dense",
            "held-out loss - dense", "s per search", "sets (seeds 0, 1, 2)"]
    return markdown_table(rows, head, numparse=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune measure calibration-curve``."""
    p.add_argument("stage", choices=("run", "summarize", "all"))
    p.add_argument("--out", required=True)
    p.add_argument("--model", default=DEFAULTS["model"])
    p.add_argument("--budget", type=int, default=DEFAULTS["budget"])
    p.add_argument("--sizes", action="append", default=[], metavar="OBJECTIVE=N,N,...",
                   help="an objective's sizes (default: " + "; ".join(f"{o}={','.join(map(str, v))}" for o, v in
                                                                    DEFAULTS["sizes"].items()) + ")")
    p.add_argument("--seeds", default=",".join(map(str, DEFAULTS["seeds"])))
    p.add_argument("--objectives", default=",".join(DEFAULTS["objectives"]))
    p.add_argument("--archive", metavar="DIR", help="also copy curve.json to DIR/calibration-curve-<model>.json "
                                                    "(where depthprune report finds it)")
    p.add_argument("--workers", type=int, default=2, help="processes, one objective each (default 2: one per core)")


def run(args: argparse.Namespace) -> int:
    """``depthprune measure calibration-curve STAGE``: bad settings are a usage error before anything runs."""
    from depthprune.common.errors import InputError

    try:
        sizes = {o: list(v) for o, v in DEFAULTS["sizes"].items()}
        for spec in args.sizes:
            name, _, values = spec.partition("=")
            sizes[name] = sorted({int(x) for x in values.split(",")})
        cfg = {"model": args.model, "budget": args.budget, "searchers": list(DEFAULTS["searchers"]),
               "seeds": [int(x) for x in args.seeds.split(",")], "objectives": args.objectives.split(",")}
        cfg["sizes"] = {o: sizes[o] for o in cfg["objectives"] if o in sizes}
    except ValueError as e:
        raise InputError(f"--sizes OBJECTIVE=N,N / --seeds N,N: integers separated by commas ({e})") from None
    bad = [o for o in cfg["objectives"] if o not in OBJECTIVES] + [o for o in sizes if o not in OBJECTIVES]
    if bad or min(min(v) for v in cfg["sizes"].values()) < 1 or args.budget < 1 or len(set(cfg["seeds"])) != len(cfg["seeds"]):
        raise InputError(f"--objectives from {sorted(OBJECTIVES)}; sizes, budget >= 1; distinct seeds (got "
                         f"{bad or cfg})")
    out = Path(args.out)
    if args.stage in ("run", "all"):
        out.mkdir(parents=True, exist_ok=True)
        config = out / "config.json"
        if config.exists() and read_json(config) != cfg:
            raise InputError(f"{config} holds another curve's settings; use another --out")
        _write_json(config, cfg)
        tasks = sorted(itertools.product(cfg["objectives"], cfg["seeds"]),
                       key=lambda t: -sum(cfg["sizes"][t[0]]) * COST_PER_UNIT[t[0]])  # most expensive first
        workers = max(1, min(args.workers, len(tasks)))
        threads = max(1, (os.cpu_count() or 1) // workers)
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(run_task, *zip(*tasks), [cfg] * len(tasks), [str(out)] * len(tasks),
                                 [threads] * len(tasks)))
        per = ", ".join(f"{o} seed {s} {d:.0f} s" for (o, s), d in zip(tasks, done))
        print(f"curve: {time.perf_counter() - start:.0f} s wall ({workers} workers x {threads} thread(s); {per})")
    if args.stage in ("summarize", "all"):
        summary = summarize(out)
        if args.archive:
            Path(args.archive).mkdir(parents=True, exist_ok=True)
            _write_json(Path(args.archive) / f"calibration-curve-{summary['config']['model']}.json", summary)
        print(table(summary))
        for objective, c in summary["chosen"].items():
            print(f"chosen {objective}: {c['size']}" + ("" if c["settled_before_largest"]
                                                        else " (the largest size: the curve has not shown the sets settling)"))
    return 0
