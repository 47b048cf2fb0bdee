"""The dense and the rebuilt pruned model, timed in alternating rounds in one process, beside the predictions.

Why one process and alternating rounds: a machine's speed drifts (other processes, frequency,
caches), and two runs minutes apart differ by more than a few removed blocks change. Each workload
runs ``warmup`` untimed rounds, then ``rounds`` timed ones; in each round both models run once, the
order reversing every round, so a drift falls on both. The speedup is reported per round (dense
seconds / pruned seconds of the same round: median, quartiles, min and max) and of the medians.
"""

from __future__ import annotations

import copy
import datetime as _dt
import platform
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from depthprune.model.masking import prune_layers
from depthprune.speed import costs
from depthprune.speed.timing import PeakMemory, Workload, param_bytes, param_count, run, spread, token_ids

SCHEMA = "depthprune-speed/1"  # a string: an integer schema is what marks a cell result (depthprune.results.schema.is_result)


def rebuild(dense: nn.Module, removed: tuple[int, ...]) -> nn.Module:
    """A truly smaller copy of ``dense``: the removed blocks deleted (:func:`depthprune.model.masking.prune_layers`,
    what ``depthprune prune --save`` writes), not a masked view; ``dense`` itself is left whole."""
    pruned = copy.deepcopy(dense)
    prune_layers(pruned, removed)
    return pruned.eval()


def time_pair(dense: nn.Module, pruned: nn.Module, work: Workload, rounds: int, warmup: int, device: str,
              bar: Any = None) -> dict[str, Any]:
    """Both models on the same inputs, alternating over rounds; seconds, speedups, tokens/s and peak memory."""
    vocab = int(dense.get_input_embeddings().weight.shape[0])
    ids = token_ids(vocab, work.batch, work.context, device)
    models = {"dense": dense, "pruned": pruned}
    seconds: dict[str, list[float]] = {"dense": [], "pruned": []}
    peaks: dict[str, tuple[int, int]] = {"dense": (0, 0), "pruned": (0, 0)}
    memory = PeakMemory(device)
    for r in range(warmup + rounds):
        order = ["dense", "pruned"] if r % 2 == 0 else ["pruned", "dense"]
        for name in order:
            memory.start()
            took = run(models[name], work, ids, device)
            peak = memory.peak()
            if r >= warmup:
                seconds[name].append(took)
                peaks[name] = max(peaks[name], peak)
            if bar is not None:
                bar.update(1)
    ratios = [d / p for d, p in zip(seconds["dense"], seconds["pruned"])]
    med = {k: spread(v)["median"] for k, v in seconds.items()}
    return {
        "workload": work.name, "kind": work.kind, "batch": work.batch, "context": work.context,
        "new_tokens": work.new_tokens, "phase": work.phase,
        "seconds": {k: spread(v) for k, v in seconds.items()},
        "tokens_per_s": {k: work.tokens / med[k] for k in seconds},
        "speedup": {**spread(ratios), "rounds": ratios},  # every round's ratio: what an interval over rounds resamples
        "speedup_of_medians": med["dense"] / med["pruned"],
        "peak_memory_bytes": {k: v[0] for k, v in peaks.items()},
        "peak_memory_increase_bytes": {k: v[1] for k, v in peaks.items()},
        "memory_how": memory.how,
    }


def cpu_flags() -> dict[str, Any]:
    """The CPU's model name and instruction-set flags (``/proc/cpuinfo``; what ``lscpu`` shows), where readable."""
    info: dict[str, Any] = {"machine": platform.machine()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and "model_name" not in info:
            info["model_name"] = value.strip()
        elif key == "flags" and "flags" not in info:
            info["flags"] = value.split()
    info["logical_cpus"] = text.count("processor\t:")
    return info


def machine(device: str, dtype: torch.dtype) -> dict[str, Any]:
    """What the numbers were measured on: the suite's environment record (kernels, torch, threads,
    revision) plus the CPU's flags and, on CUDA, the GPU."""
    from depthprune.results.provenance import environment

    env = environment(device, str(dtype).removeprefix("torch."))
    env["cpu"] = cpu_flags()
    env["torch"] = torch.__version__
    return env


def measure(dense: nn.Module, pruned: nn.Module, removed: tuple[int, ...], works: list[Workload], rounds: int,
            warmup: int, device: str, table: dict[str, Any] | None, progress: bool = True) -> dict[str, Any]:
    """Every workload on both models, with the blocks-only and the cost-table predictions beside each."""
    from tqdm.auto import tqdm

    n = len(costs.block_types(dense.config))
    rows = []
    with tqdm(total=len(works) * 2 * (warmup + rounds), desc="speed", disable=not progress, leave=False) as bar:
        for work in works:
            row = time_pair(dense, pruned, work, rounds, warmup, device, bar)
            row["predicted"] = {"blocks_only": costs.blocks_only(n, len(removed)),
                                "cost_table": costs.predict(table, work.phase, removed)}
            rows.append(row)
    return {
        "schema": SCHEMA, "removed": list(removed), "n_layers": n, "n_kept": n - len(removed),
        "block_types_removed": sorted({costs.block_types(dense.config)[i] for i in removed}),
        "params": {"dense": param_count(dense), "pruned": param_count(pruned)},
        "param_bytes": {"dense": param_bytes(dense), "pruned": param_bytes(pruned)},
        "rounds": rounds, "warmup": warmup, "workloads": rows,
        "cost_table": None if table is None else {k: table.get(k) for k in ("model", "date", "command", "revision")},
        "command": " ".join(["depthprune", *sys.argv[1:]]) if sys.argv else "",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def summary_lines(record: dict[str, Any]) -> list[str]:
    """The table ``depthprune speed`` prints: per workload, both models' medians, the measured speedup
    (median of the rounds' ratios, [min-max]), the two predictions, and each model's weights plus the
    peak memory its run added (the process's own peak also holds the other model)."""
    p = record["params"]
    lines = [f"removed    {','.join(map(str, record['removed']))} ({len(record['removed'])} of {record['n_layers']} "
             f"blocks: {', '.join(record['block_types_removed'])})",
             f"params     dense {p['dense']:,}  pruned {p['pruned']:,} ({p['pruned'] / p['dense']:.3f})",
             f"{'workload':<22} {'dense s':>9} {'pruned s':>9} {'speedup [min-max]':>22} {'L/(L-M)':>8} {'table':>7}"
             f" {'weights+peak MB d/p':>20}"]
    for row in record["workloads"]:
        s, pred = row["speedup"], row["predicted"]
        table = "-" if pred["cost_table"] is None else f"{pred['cost_table']:.3f}"
        mem = {k: record["param_bytes"][k] + v for k, v in row["peak_memory_increase_bytes"].items()}
        lines.append(f"{row['workload']:<22} {row['seconds']['dense']['median']:>9.4f} "
                     f"{row['seconds']['pruned']['median']:>9.4f} "
                     f"{s['median']:>8.3f} [{s['min']:.3f}-{s['max']:.3f}] {pred['blocks_only']:>8.3f} {table:>7}"
                     f" {mem['dense'] / 2**20:>10.1f}/{mem['pruned'] / 2**20:<9.1f}")
    return lines
