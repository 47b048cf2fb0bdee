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
                           answer, calibration_seed, search, variant, budget, search_seed, stand_in;
                           heal (the heal after pruning; only in a healed result)
    n_layers, removed, calibration_loss, dense_calibration_loss
    evaluated              whether the pruned model was evaluated
    metrics*, dense_metrics*, evaluation_protocol*
    item_outcomes*         task -> acc / acc_norm -> "0110..." per item (lm-eval doc order), for paired tests
    item_clusters*         task -> each item's cluster number (tasks whose items carry a ``cluster``), for
                           resampling dependent items together; absent: every item its own cluster
    window_nll*            perplexity dataset -> each window's mean NLL (nats/token): the noise of ``*_ppl``
    healing                only in a healed result: its configuration, the healing data's fingerprint, the
                           training losses, tokens, seconds, the merge check, and the unhealed result's
                           fingerprint (:mod:`depthprune.healing`)
    objective_params, calibration_protocol, search_params
    search_info            what the searcher resolved or read: cbo's ``energy`` {h, J}, bi's ``block_influence``,
                           bo's ``gp_fits`` (each GP fit's parameters), so that it replays without the model
                           (:mod:`depthprune.verify.replay`)
    cost                   evaluations, layer_forwards, layer_backwards (as if alone), seconds, ...
    prior                  the single-removal losses f({i}) (null for non-finite)
    trace                  [[removed set], loss] in the searcher's evaluation order
    environment, fingerprint, settings, finished

Readers get a :class:`Result`: a read-only mapping over exactly this stored form (``r["metrics"]``,
``r["trace"]``, ...) whose identity is read one way, typed: ``r.identity.model``, ``r.identity.search``,
and a report condition's key as ``r.condition``. The identity's fields are not at the top level
(``r["model"]`` raises a :class:`KeyError` that says so).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from depthprune.common import jsonio
from depthprune.common.jsonio import JSONFileError

SCHEMA = 2
REQUIRED_FIELDS = ("schema", "cell", "identity", "n_layers", "removed", "calibration_loss", "evaluated", "objective_params",
                   "metrics", "cost", "environment", "fingerprint", "settings")
COST_FIELDS = ("evaluations", "layer_forwards", "layer_backwards", "seconds", "search_seconds")


class ResultError(ValueError):
    """A result file is unreadable, incomplete or of another schema; the message names the file."""


class ResultFileError(ResultError, JSONFileError):
    """A file read as results (a cell's JSON, a dense-model file, an archive or one of its lines) is broken.

    Bad input, not a failure of the run: every command that reads results exits 2 with this one line
    (``<path>[:line]: <what is wrong>``) instead of skipping the file, which would leave its cells out
    of a report or a check without a word. A :class:`~depthprune.common.jsonio.JSONFileError` (``path``, ``problem``,
    ``line``), so what catches a broken JSON file catches this too.
    """


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
    #: the heal after pruning (``lora-t65536-s0``: method, token budget, seed; :mod:`depthprune.healing`), None
    #: for a result of the pruned model as searched. Absent from the stored form when None, so every unhealed
    #: result keeps the identity, and so the fingerprint, it had before healing existed
    heal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.heal is None:
            del out["heal"]
        return out


class Condition(NamedTuple):
    """A report condition: the cells whose searchers the report compares with each other (a grid's
    model, calibration objective and budget); :attr:`Result.condition`."""

    grid: str | None
    model: str
    objective: str
    budget: int


#: identity fields a stored result may lack (absent: their default, e.g. no heal)
OPTIONAL_IDENTITY = frozenset({"heal"})

#: identity fields that are no top-level field of the stored form (all of them): ``r[key]`` is refused
_IDENTITY_KEYS = frozenset(Identity.__dataclass_fields__) - set(REQUIRED_FIELDS)


class Result(Mapping[str, Any]):
    """One cell result as stored (schema 2), read-only: a mapping over its top-level fields, and typed
    accessors for what every reader needs. The identity is read one way, ``r.identity.<field>``; a
    lifted read (``r["model"]``, ``r.get("search")``) raises a :class:`KeyError` saying so.

    Made by :func:`validate` / :func:`check_result` (so by every reader of results), or from a stored
    dict already checked with :meth:`of`. :func:`to_json` gives the stored dict back, unchanged. Its
    top level and identity cannot be set; nested values (``metrics``, ``trace``...) are the stored JSON's
    own: a change is a new result, :meth:`replace`.
    """

    __slots__ = ("_data", "_identity")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = {**data, "identity": dict(data["identity"])}  # a copy: the caller's dicts may change later
        self._identity = Identity(**self._data["identity"])

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Result:
        """``data`` (a stored result, or already a :class:`Result`) as a :class:`Result`; not checked."""
        return data if isinstance(data, Result) else cls(data)

    def __getitem__(self, key: str) -> Any:
        if key in _IDENTITY_KEYS:
            raise KeyError(f"{key!r} is an identity field, not a top-level one: read r.identity.{key}")
        if key == "identity":  # read-only: r.identity is the one way to read it
            return MappingProxyType(self._data["identity"])
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._data or key in _IDENTITY_KEYS else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Result):
            return self._data == other._data
        return isinstance(other, Mapping) and self._data == dict(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping: equal by value, not hashable

    def __repr__(self) -> str:
        return f"Result(cell={self._data.get('cell')!r}, identity={self._identity!r})"

    def replace(self, identity: Identity | None = None, drop: Iterable[str] = (), **fields: Any) -> Result:
        """A copy with the top-level fields in ``drop`` left out (those absent are no error), these fields
        set, and ``identity`` if given (an identity field is no top-level one:
        ``r.replace(identity=dataclasses.replace(r.identity, grid=...))``)."""
        dropped = set(drop)
        bad = (set(fields) | dropped) & _IDENTITY_KEYS
        if bad:
            raise KeyError(f"{', '.join(sorted(bad))}: identity fields; pass identity=")
        if identity is not None:
            fields["identity"] = identity.to_dict()
        return Result({**{k: v for k, v in self._data.items() if k not in dropped}, **fields})

    @property
    def identity(self) -> Identity:
        return self._identity

    @property
    def condition(self) -> Condition:
        ident = self._identity
        return Condition(ident.grid, ident.model, ident.objective, ident.budget)

    @property
    def cell(self) -> str | None:
        cell: str | None = self._data["cell"]
        return cell

    @property
    def removed(self) -> list[int]:
        return list(self._data["removed"])

    @property
    def calibration_loss(self) -> float:
        return float(self._data["calibration_loss"])

    @property
    def evaluated(self) -> bool:
        return bool(self._data["evaluated"])

    @property
    def metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = self._data["metrics"]
        return metrics

    @property
    def cost(self) -> dict[str, Any]:
        cost: dict[str, Any] = self._data["cost"]
        return cost


def calibration_of(result: Result) -> tuple[str, str, str]:
    """The calibration a result's losses come from: model, objective and the objective's parameters as canonical
    JSON (one scorer each). Not its *condition* (:class:`Condition`: grid, model, objective, budget)."""
    return result.identity.model, result.identity.objective, jsonio.canonical(result.get("objective_params", {}))


def fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(jsonio.canonical(settings, default=str).encode()).hexdigest()[:16]


def _problem(data: Any) -> str | None:
    """What keeps ``data`` (a JSON value, or a :class:`Result` to check again) from being a result of this
    schema, or None."""
    if isinstance(data, Result):
        data = to_json(data)
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("schema") != SCHEMA:
        return (f"schema {data.get('schema')!r} (this depthprune reads schema {SCHEMA}; "
                "rerun the cell to recompute it)")
    missing = [k for k in REQUIRED_FIELDS if k not in data]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    ident = data["identity"]
    fields = set(Identity.__dataclass_fields__)
    required = fields - OPTIONAL_IDENTITY
    got = set(ident) if isinstance(ident, dict) else set()
    if not isinstance(ident, dict) or not required <= got <= fields:
        return (f"identity must have exactly the fields {', '.join(sorted(required))}, and may have "
                f"{', '.join(sorted(OPTIONAL_IDENTITY))} (missing: {', '.join(sorted(required - got)) or 'none'}; "
                f"unknown: {', '.join(sorted(got - fields)) or 'none'})")
    if not isinstance(data["cost"], dict):
        return "cost must be a JSON object"
    cost_missing = [k for k in COST_FIELDS if k not in data["cost"]]
    if cost_missing:
        return f"cost lacks {', '.join(cost_missing)}"
    return None


def validate(data: Any, where: str) -> Result:
    """Check a result object; returns it as a :class:`Result`."""
    problem = _problem(data)
    if problem is not None:
        raise ResultError(f"{where}: {problem}")
    return Result(data)


def is_result(data: Any) -> bool:
    """Whether a JSON value claims to be a cell result (of any schema: an old one is an error, not a skip).

    Results carry an integer ``schema`` (1, 2) and an ``identity``; the other JSON files that live
    among results (calibration-curve summaries, a rehearsal's manifest, a saved checkpoint's config,
    ``throughput.json`` with its string schema) carry neither, and are not read as results.
    """
    return isinstance(data, dict) and ("identity" in data or type(data.get("schema")) is int)


def parse_json(text: str, path: str | Path, line: int | None = None) -> Any:
    """``text`` (a file's or an archive line's) as JSON; a :class:`ResultFileError` naming ``path``
    (and ``line``) that says whether it is cut short or not JSON at all (:func:`depthprune.common.jsonio.parse_json`)."""
    try:
        return jsonio.parse_json(text, path, line, expected="a JSON object")
    except JSONFileError as err:
        raise ResultFileError(path, err.problem, line) from None


def read_json_file(path: str | Path) -> Any:
    """The JSON in ``path``, or a :class:`ResultFileError` naming it (unreadable, not UTF-8, not JSON, truncated)."""
    try:
        return jsonio.read_json(path, expected="a JSON object")
    except JSONFileError as err:
        raise ResultFileError(path, err.problem) from None
    except OSError as err:
        raise ResultFileError(path, f"cannot be read ({err.strerror or err})") from None


def check_result(data: Any, path: str | Path, line: int | None = None, name: str | None = None) -> Result:
    """``data`` read from ``path`` (its line ``line``, archive member ``name``) as a :class:`Result`, as
    :func:`validate` does; a :class:`ResultFileError` that names the file where it is not one."""
    problem = _problem(data)
    if problem is not None:
        raise ResultFileError(path, problem if name is None else f"{name}: {problem}", line)
    return Result(data)


def read_result(path: str | Path) -> Result:
    """The result in ``path``; a :class:`ResultFileError` naming it when it is not a complete result of this schema."""
    return check_result(read_json_file(path), path)


def read_result_file(path: str | Path) -> Result | None:
    """As :func:`read_result`, but None for a JSON file that is no result at all (:func:`is_result`):
    what the readers of a results directory skip on purpose. A broken file still raises."""
    data = read_json_file(path)
    return check_result(data, path) if is_result(data) else None


def read_dense(path: str | Path) -> dict[str, Any]:
    """A dense-model file (``<grid>/dense/<model>.json``): a JSON object, or a :class:`ResultFileError` naming it."""
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise ResultFileError(path, f"not a JSON object (a dense-model file holds one, got {type(data).__name__})")
    return data


def to_json(result: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form, as a plain dict (a :class:`Result` is a view of it; a new result already is it)."""
    if isinstance(result, Result):
        return {**result._data, "identity": dict(result._data["identity"])}
    return dict(result)
