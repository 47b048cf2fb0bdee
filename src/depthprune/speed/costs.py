"""The per-block cost table: what each block type, and what stays (embedding, head), costs a model.

"Remove M of L blocks and inference gets L/(L-M) times faster" assumes every block costs the same
and nothing else costs anything. Neither holds in general: the embedding and output head stay, and
gemma3 interleaves sliding-window and full-attention blocks, which cost differently at a context
longer than the window. The table measures it, per phase (``prefill@<context>``, ``decode@<context>``):

* the model is timed, at batch 1, as a masked view (:func:`depthprune.model.masking.keep_only`, the same
  compute as the rebuilt model) with a few kept sets: all blocks, one block of each type, and all
  blocks of one type (a model with one type: the first half);
* a least-squares fit over those probes gives a fixed cost (embedding, final norm, head and the
  framework's per-call overhead) and one cost per block type.

A removed set's predicted speedup is then ``(fixed + sum over all blocks) / (fixed + sum over the kept
blocks)``: exactly 1.0 for the dense model. The tables of the models the suite runs are measured once
and shipped (``depthprune/assets/speed/<model>.json``, with the machine, command, date and revision),
so a cell's predicted speedup is the same on every machine; ``depthprune speed --cost-table`` makes one.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from depthprune.common.jsonio import read_json
from depthprune.model.masking import keep_only, restore
from depthprune.speed.timing import Workload, run, spread, token_ids

#: where the shipped cost tables live (package data)
TABLE_DIR = Path(__file__).resolve().parent.parent / "assets" / "speed"
#: the single block type of a model whose config does not name its layers' types
PLAIN = "decoder"
TABLE_SCHEMA = "depthprune-cost-table/1"


def block_types(config: Any) -> list[str]:
    """Each block's type: ``config.layer_types`` where the config lists one per layer (gemma3's
    ``sliding_attention`` / ``full_attention``), else one type for all."""
    cfg = getattr(config, "text_config", None) or config
    n = int(cfg.num_hidden_layers)
    types = getattr(cfg, "layer_types", None)
    if isinstance(types, (list, tuple)) and len(types) == n:
        return [str(t) for t in types]
    return [PLAIN] * n


def probe_sets(types: Sequence[str]) -> list[tuple[int, ...]]:
    """The kept sets the table times: all blocks, the first block of each type, and all blocks of
    each type (with a single type, its first half instead), each once."""
    n = len(types)
    kinds = list(dict.fromkeys(types))
    sets: list[tuple[int, ...]] = [tuple(range(n))]
    sets += [(types.index(t),) for t in kinds]
    if len(kinds) > 1:
        sets += [tuple(i for i in range(n) if types[i] == t) for t in kinds]
    else:
        sets.append(tuple(range(max(2, n // 2))))
    return list(dict.fromkeys(sets))


def fit(types: Sequence[str], kept_sets: Sequence[tuple[int, ...]], seconds: Sequence[float]) -> tuple[float, dict[str, float]]:
    """``(fixed, {type: cost})`` of the least-squares fit ``seconds ~ fixed + sum of the kept blocks' costs``."""
    import numpy as np

    kinds = list(dict.fromkeys(types))
    rows = [[1.0] + [float(sum(1 for i in kept if types[i] == t)) for t in kinds] for kept in kept_sets]
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(seconds, dtype=float), rcond=None)
    return float(coef[0]), {t: float(c) for t, c in zip(kinds, coef[1:])}


def cost_of(table: dict[str, Any], phase: str, kept: Iterable[int]) -> float:
    """The table's predicted seconds of ``phase`` for the model keeping the blocks ``kept``."""
    ph = table["phases"][phase]
    types = table["block_types"]
    return float(ph["fixed_s"]) + sum(float(ph["block_s"][types[i]]) for i in kept)


def predict(table: dict[str, Any] | None, phase: str, removed: Iterable[int]) -> float | None:
    """The cost table's speedup for removing ``removed`` in ``phase`` (None where the table lacks the phase)."""
    if table is None or phase not in table.get("phases", {}):
        return None
    n = len(table["block_types"])
    gone = set(removed)
    return cost_of(table, phase, range(n)) / cost_of(table, phase, (i for i in range(n) if i not in gone))


def blocks_only(n_layers: int, removed: int) -> float:
    """The paper's rule of thumb: cost proportional to the blocks kept, L / (L - M)."""
    return n_layers / (n_layers - removed)


def table_path(model_id: str) -> Path:
    """Where the shipped table of ``model_id`` lives."""
    return TABLE_DIR / f"{model_id}.json"


def load_table(model_id: str) -> dict[str, Any] | None:
    """The shipped cost table of ``model_id``, or None where none is shipped."""
    path = table_path(model_id)
    return read_json(path) if path.is_file() else None


def _time_probes(model: nn.Module, work: Workload, ids: torch.Tensor, kept_sets: list[tuple[int, ...]],
                 rounds: int, warmup: int, device: str, bar: Any) -> list[list[float]]:
    """Seconds of ``work`` per kept set and round; the order of the sets reverses every round."""
    times: list[list[float]] = [[] for _ in kept_sets]
    for r in range(warmup + rounds):
        order = list(range(len(kept_sets)))
        if r % 2:
            order.reverse()
        for k in order:
            undo = keep_only(model, list(kept_sets[k]))
            try:
                seconds = run(model, work, ids, device)
            finally:
                restore(model, undo)
            if r >= warmup:
                times[k].append(seconds)
            bar.update(1)
    return times


def measure_table(model: nn.Module, model_id: str, contexts: tuple[int, int], new_tokens: int, rounds: int,
                  warmup: int, device: str, progress: bool = True) -> dict[str, Any]:
    """Measure ``model``'s cost table at batch 1: prefill at both contexts, decode after the short prompt."""
    from tqdm.auto import tqdm

    types = block_types(model.config)
    kept_sets = probe_sets(types)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    works = [Workload("prefill", 1, c) for c in contexts] + [Workload("decode", 1, contexts[0], new_tokens)]
    phases: dict[str, Any] = {}
    with tqdm(total=len(works) * len(kept_sets) * (rounds + warmup), desc=f"cost table {model_id}",
              disable=not progress, leave=False) as bar:
        for work in works:
            ids = token_ids(vocab, work.batch, work.context, device)
            times = _time_probes(model, work, ids, kept_sets, rounds, warmup, device, bar)
            medians = [spread(t)["median"] for t in times]
            fixed, per_type = fit(types, kept_sets, medians)
            probes = [{"kept": list(k), "seconds": spread(t),
                       "fitted_s": fixed + sum(per_type[types[i]] for i in k)} for k, t in zip(kept_sets, times)]
            phases[work.phase] = {"workload": work.name, "fixed_s": fixed, "block_s": per_type, "probes": probes}
    return {"schema": TABLE_SCHEMA, "model": model_id, "n_layers": len(types), "block_types": types,
            "contexts": list(contexts), "new_tokens": new_tokens, "rounds": rounds, "warmup": warmup,
            "batch": 1, "phases": phases,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def dense_check(table: dict[str, Any]) -> bool:
    """Whether the table predicts exactly 1.0 for the dense model in every phase (its own sanity check)."""
    return all(predict(table, phase, ()) == 1.0 for phase in table["phases"])
