"""The result schema (version 2): one JSON object per search, from the CLI and the grid alike.

A result says *what* was run (``identity``: every axis a grid may vary), *what came out*
(``removed``, ``calibration_loss``, ``metrics``), *what it cost* (``cost``, counted as if
the searcher ran alone, see :mod:`depthprune.recipe`), and *whether it may be reused*
(``fingerprint``: a hash of ``settings``, which include the identity, every parameter,
the result-affecting code and the library versions).

Top-level fields (``*`` = only meaningful when ``evaluated``)::

    schema                 2
    cell                   grid cell id, or null outside a grid
    identity               Identity.to_dict(): grid, model, weights, profile, objective, dataset,
                           answer, calibration_seed, search, variant, budget, search_seed, stand_in
    n_layers, removed, calibration_loss, dense_calibration_loss
    evaluated              whether the pruned model was evaluated
    metrics*, dense_metrics*, evaluation_protocol*
    item_outcomes*         task -> acc / acc_norm -> "0110..." per item (lm-eval doc order), for paired tests
    item_clusters*         task -> each item's cluster number (tasks whose items carry a ``cluster``), for
                           resampling dependent items together; absent: every item its own cluster
    window_nll*            perplexity dataset -> each window's mean NLL (nats/token): the noise of ``*_ppl``
    objective_params, calibration_protocol, search_params, search_info
    cost                   evaluations, layer_forwards, layer_backwards (as if alone), seconds, ...
    prior                  the single-removal losses f({i}) (null for non-finite)
    trace                  [[removed set], loss] in the searcher's evaluation order
    environment, fingerprint, settings, finished

Readers get the identity's fields lifted to the top level as well (``r["model"]``,
``r["search"]``, ...), by :func:`read_result`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCHEMA = 2
REQUIRED_FIELDS = ("schema", "cell", "identity", "n_layers", "removed", "calibration_loss", "evaluated", "objective_params",
                   "metrics", "cost", "environment", "fingerprint", "settings")
COST_FIELDS = ("evaluations", "layer_forwards", "layer_backwards", "seconds", "search_seconds")


class ResultError(ValueError):
    """A result file is unreadable, incomplete or of another schema; the message names the file."""


@dataclass(frozen=True)
class Identity:
    """Every axis a grid may vary, plus what makes two runs of one cell differ."""

    grid: str | None
    model: str
    weights: str  # fingerprint of the weight files actually loaded
    profile: str
    objective: str
    dataset: str
    answer: str | None  # margin answer form (label / option / cloze); None for other objectives
    calibration_seed: int
    search: str
    variant: str  # a named searcher-parameter variant ("default" = the grid's parameters)
    budget: int
    search_seed: int
    stand_in: bool  # made on a rehearsal stand-in model: never resumed or compared as a real result

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def validate(data: Any, where: str) -> dict[str, Any]:
    """Check a result object; returns it with the identity's fields lifted to the top level."""
    if not isinstance(data, dict):
        raise ResultError(f"{where}: not a JSON object")
    if data.get("schema") != SCHEMA:
        raise ResultError(f"{where}: schema {data.get('schema')!r} (this depthprune reads schema {SCHEMA}; "
                          "rerun the cell to recompute it)")
    missing = [k for k in REQUIRED_FIELDS if k not in data]
    if missing:
        raise ResultError(f"{where}: missing field(s) {', '.join(missing)}")
    ident = data["identity"]
    fields = set(Identity.__dataclass_fields__)
    if not isinstance(ident, dict) or set(ident) != fields:
        got = set(ident) if isinstance(ident, dict) else set()
        raise ResultError(f"{where}: identity must have exactly the fields {', '.join(sorted(fields))} "
                          f"(missing: {', '.join(sorted(fields - got)) or 'none'}; "
                          f"unknown: {', '.join(sorted(got - fields)) or 'none'})")
    cost_missing = [k for k in COST_FIELDS if k not in data["cost"]]
    if cost_missing:
        raise ResultError(f"{where}: cost lacks {', '.join(cost_missing)}")
    return {**data, **ident}


def read_result(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ResultError(f"{path}: not valid JSON ({err})") from None
    return validate(data, str(path))


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    """The stored form: identity fields only inside ``identity`` (undoes :func:`validate`'s lifting)."""
    lifted = set(Identity.__dataclass_fields__) - set(REQUIRED_FIELDS)
    return {k: v for k, v in result.items() if k not in lifted}
