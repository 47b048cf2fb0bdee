"""The dense accuracy of a real model on the WordNet multiple-choice tasks, with 95% intervals.

    depthprune measure wordnet-accuracy --model smollm2-135m [--dtype bfloat16] [--out FILE]

Each task's full test split through the suite's own evaluation (``Session.evaluate``: lm-eval on
the in-memory model, the shared-prefix adapter, no perplexity, no LAMBADA), one task at a
time so each gets its own wall time (``seconds_per_1k_items``). Per metric (acc, acc_norm):
the accuracy, a 95% percentile-bootstrap interval resampling the items' clusters
(:func:`depthprune.builders.model_free.clustered_interval`) and a Wilson interval, against chance
1/4; the headline metric is the one fixed with the construction (:mod:`depthprune.builders.wordnet.tasks`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from depthprune.builders import model_free as bl
from depthprune.builders.wordnet import tasks as mc_tasks
from depthprune.common.jsonio import dumps
from depthprune.report.intervals import wilson

HEADLINE = {task: "acc" for task in mc_tasks.TASKS}


def profile(tasks: tuple[str, ...] = mc_tasks.TASKS):
    """The real profile with the WordNet tasks as its zero-shot tasks (headline: acc)."""
    from depthprune.data.profiles import REAL

    return dataclasses.replace(REAL, tasks=tasks, headline={t: HEADLINE[t] for t in tasks})


def measure(model: str, dtype: str = "auto", tasks: tuple[str, ...] = mc_tasks.TASKS, batch_size: int = 8,
            threads: int | None = None) -> dict[str, Any]:
    import torch

    from depthprune.recipe import Session

    if threads:
        torch.set_num_threads(threads)
    prof = profile(tasks)
    session = Session.open(model, prof, device="cpu", dtype=dtype)
    out: dict[str, Any] = {"model": model, "weights": session.weights, "dtype": session.dtype,
                           "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
                           "adapter": "shared-prefix", "batch_size": batch_size, "tasks": {}}
    for task in tasks:
        test = bl.read_items(mc_tasks.OUT / "data" / task / "test.jsonl")
        clusters = [item["cluster"] for item in test]
        # every item (eval_config ignores None overrides, so the profile's limit is lifted here)
        cfg = dataclasses.replace(prof.eval_config(tasks=(task,), lambada=False, perplexity=(), batch_size=batch_size),
                                  limit=None)
        load = os.getloadavg()[0]
        start, cpu = time.perf_counter(), time.process_time()
        result = session.evaluate((), cfg)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        tokens = sum(len(session.tokenizer(item["ctx"])["input_ids"]) + sum(
            len(session.tokenizer(" " + o, add_special_tokens=False)["input_ids"]) for o in item["options"])
            for item in test)
        row: dict[str, Any] = {"n": len(test), "chance": 1 / mc_tasks.K, "headline": HEADLINE[task],
                               "seconds": round(seconds, 1),
                               "seconds_per_1k_items": round(1000 * seconds / len(test), 1),
                               # process CPU seconds (all threads): less moved by other processes than wall time
                               "cpu_seconds_per_1k_items": round(1000 * cpu / len(test), 1),
                               "tokens_per_item": round(tokens / len(test), 1),
                               # the machine's 1-minute load average before and after: a shared CPU slows the timing
                               "load_average": [round(load, 2), round(os.getloadavg()[0], 2)]}
        for metric in ("acc", "acc_norm"):
            outcomes = [int(c) for c in result.items[task][metric]]
            assert len(outcomes) == len(test)
            lo, hi = bl.clustered_interval(outcomes, clusters, seed=0)
            w = wilson(sum(outcomes) / len(outcomes), len(outcomes))  # the report's, at 95%
            wlo, whi = w.low, w.high
            row[metric] = {"acc": round(sum(outcomes) / len(outcomes), 4), "cluster_bootstrap_95": [round(lo, 4),
                           round(hi, 4)], "wilson_95": [round(wlo, 4), round(whi, 4)]}
        out["tasks"][f"real_{task}"] = row
        print(json.dumps({task: row}), file=sys.stderr)
    session.close()
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune measure wordnet-accuracy``."""
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--tasks", default=",".join(mc_tasks.TASKS))
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, default=None, help="write the measurement as JSON")


def run(args: argparse.Namespace) -> int:
    """``depthprune measure wordnet-accuracy``: print the measurement (and write it to ``--out``)."""
    res = measure(args.model, args.dtype, tuple(t for t in args.tasks.split(",") if t), args.batch_size, args.threads)
    text = dumps(res, indent=1, sort_keys=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0
