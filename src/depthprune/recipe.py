"""The pruning recipe: the one code path from (model, objective, searcher, budget) to a result.

    session = Session.open("tiny-llama3")              # load once
    calib = session.calibrate("ppl")                   # batches, dense scorer, prior: once per objective
    outcome = calib.search("greedy", budget=3, seed=0) # cost counted as if the searcher ran alone
    evaluation = session.evaluate(outcome.removed)     # optional: perplexity suite + zero-shot
    result = make_result(session, calib, outcome, evaluation)   # one result schema (depthprune.results.schema)

``depthprune prune``, ``depthprune cell`` and every grid cell run exactly these steps, so
the CLI with a cell's settings reproduces the cell's removed set, loss and cost.

Shared work and honest cost. Within a session the dense pass and the single-removal
*prior* are computed once per objective and handed to every searcher (DESIGN.md); each
search runs on a fork of the dense scorer. The cost a result reports is nevertheless the
cost *as if the searcher ran alone*: the prior is charged to every searcher that asks
for it, and layer-forwards are recounted by replaying the searcher's own requests
through a private prefix cache (:func:`depthprune.scoring.scorer.replay_cost`) — so the count
is the same on every machine and in every order of cells. What this process actually
ran is reported beside it (``layer_forwards_here``), and wall-clock seconds beside both.

One memo per condition. Every loss a search of a calibration computes is kept in the
calibration's memo (:attr:`Calibration.memo`) and handed to later searches of the same
condition, so greedy at M=9 does not re-run greedy at M=7's path and beam re-uses the sets
greedy scored. Losses do not depend on where they were computed (a set's loss is the same
forward pass either way), so removed sets and losses are unchanged, and the counts are
unchanged because they are replayed from the searcher's own requests. Seconds as if alone
add to the measured search time what the re-used sets took where they were computed
(``shared_seconds``, an estimate: that run's prefix cache may have differed). cbo's gate-gradient
energy, the same for every budget of a condition, is shared the same way.

One store per condition on disk. A session given a ``store_path`` (grid runs: the results
directory's ``score-store.sqlite``) keeps the memo, the prior and the energy in a
:class:`~depthprune.scoring.score_store.ScoreStore` as they are computed and starts from what it holds, so
other xdist workers, later runs and a run resumed after a crash do not compute them again. The
store's key holds everything a loss depends on (:func:`depthprune.recipe.calibration_description`), so a loss from older code,
other kernels or another dtype never matches. ``depthprune verify`` never opens one.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from depthprune.common.jsonio import write_json_atomic
from depthprune.data.profiles import Profile, get_profile
from depthprune.data.protocol import EvalConfig
from depthprune.evaluation.evaluate import EvalResult, evaluate
from depthprune.model import (
    STAND_IN_MARKER,
    ModelSpec,
    is_stand_in,
    load_model,
    locate,
    resolve,
    resolve_device,
    resolve_dtype,
    weights_file_in,
)
from depthprune.model.masking import prune_layers
from depthprune.model.weights import fingerprint as weights_fingerprint
from depthprune.objectives import Objective, make_objective
from depthprune.results.provenance import code_fingerprint, environment, library_versions
from depthprune.results.schema import SCHEMA, Identity, fingerprint, to_json
from depthprune.scoring.score_store import ScoreStore, store_key
from depthprune.scoring.scorer import ENERGY, Scorer, replay_cost
from depthprune.search import SearchResult, get_searcher

#: How ``cost`` is counted; written into every result.
COUNTING = ("as if the searcher ran alone: the dense pass, the single-removal prior when the searcher uses it, "
            "and the searcher's own requests replayed through a private prefix cache (keep_best per size, byte "
            "budget not binding); gate-gradient passes counted per pass; the start-up self-check excluded; "
            "seconds include, as an estimate, the time of sets another search of the condition computed "
            "(shared_seconds)")


@dataclass
class Session:
    """A loaded model with the settings every search on it shares."""

    spec: ModelSpec
    profile: Profile
    model: Any
    tokenizer: Any
    device: str
    dtype: str  # the torch dtype actually loaded, e.g. "torch.float32"
    weights: str  # fingerprint of the weight files loaded (depthprune.model.weights)
    stand_in: bool  # a rehearsal stand-in under a real id: never a real result
    batch_size: int
    load_seconds: float
    #: the score store this session's calibrations read and write (:mod:`depthprune.scoring.score_store`);
    #: None (the default, and always for ``depthprune verify``, which must measure afresh): no store
    store_path: Path | None = None
    _calibrations: dict[tuple, Calibration] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, model: str | ModelSpec, profile: str | Profile | None = None, device: str = "auto",
             dtype: str = "auto", batch_size: int | None = None, allow_download: bool = False) -> Session:
        spec = resolve(model)
        prof = get_profile(profile or spec.profile)
        dev = resolve_device(device)
        start = time.perf_counter()
        path = locate(spec, allow_download=allow_download)
        hf_model, tokenizer = load_model(spec, device=dev, dtype=dtype, allow_download=allow_download)
        weights = (weights_fingerprint(path, weights_file_in(spec, path)) if Path(path).is_dir()
                   else f"hub:{path}")
        return cls(spec, prof, hf_model, tokenizer, dev, str(next(hf_model.parameters()).dtype), weights,
                   is_stand_in(path), batch_size or prof.batch_size, time.perf_counter() - start)

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def calibrate(self, objective: str, **params: Any) -> Calibration:
        """The objective's calibration batches, dense scorer and prior (built once per settings)."""
        obj = make_objective(objective, self.profile, **params)
        key = (objective, tuple(sorted(obj.params().items())))
        if key not in self._calibrations:
            self._calibrations[key] = Calibration.build(self, obj)
        return self._calibrations[key]

    def calibrations(self) -> list[Calibration]:
        """The objectives calibrated so far on this session."""
        return list(self._calibrations.values())

    def drop_calibrations(self) -> None:
        """Free the calibrations built so far (their batches, scorers and state caches): for callers that
        calibrate many settings on one loaded model, as the calibration-size curve does."""
        self._calibrations.clear()
        gc.collect()

    def evaluate(self, removed: tuple[int, ...] | list[int], cfg: EvalConfig | None = None,
                 cache_dir: str | Path | None = None) -> EvalResult:
        return evaluate(self.model, self.tokenizer, self.spec.id, list(removed), self.profile,
                        cfg or self.profile.eval_config(), cache_dir=cache_dir, weights=self.weights)

    def close(self) -> None:
        self._calibrations.clear()
        del self.model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


@dataclass
class Calibration:
    """One objective on one session: the dense scorer and the single-removal prior, shared."""

    session: Session
    objective: Objective
    scorer: Scorer
    prior: list[float]
    dense_seconds: float
    prior_seconds: float
    #: loss and wall seconds of every set any search of this condition computed (module docstring)
    memo: dict[frozenset[int], tuple[float, float]] = field(default_factory=dict, repr=False)
    #: the prior's seconds in this process (``prior_seconds`` counts singles the store held as they took there)
    prior_seconds_here: float = 0.0
    #: the gate-gradient energy (cbo's quadratic model) and the seconds it took, once computed or stored
    energy: tuple[tuple[list[float], list[list[float]]], float] | None = field(default=None, repr=False)
    store: ScoreStore | None = field(default=None, repr=False)
    #: the last search's fork: the next one takes over its prefix cache (one warm calibration per session)
    warm: Scorer | None = field(default=None, repr=False)

    @classmethod
    def build(cls, session: Session, objective: Objective) -> Calibration:
        start = time.perf_counter()
        batches = objective.prepare(session.tokenizer, session.profile, session.batch_size)
        scorer = Scorer(session.model, batches, objective)
        dense_seconds = time.perf_counter() - start
        store = None
        if session.store_path is not None:
            description = calibration_description(session, objective)
            store = ScoreStore(session.store_path, store_key(description), description)
        memo = store.losses() if store is not None else {}
        start = time.perf_counter()
        prior, prior_seconds = [], 0.0
        for i in range(scorer.n_layers):
            single = frozenset([i])
            if single not in memo:
                began = time.perf_counter()
                loss = scorer(single)
                memo[single] = (loss, time.perf_counter() - began)
                if store is not None:
                    store.put(single, *memo[single])
            prior.append(memo[single][0])
            prior_seconds += memo[single][1]
        scorer.cache.drop_spares()  # the calibration lives as long as its session; its searches fork a cache
        # the stored energy (and other workers' later sets) are read before each search (_refresh)
        return cls(session, objective, scorer, prior, dense_seconds, prior_seconds, memo,
                   time.perf_counter() - start, None, store)

    @property
    def name(self) -> str:
        return self.objective.name

    @property
    def dense_loss(self) -> float:
        return self.scorer.dense_loss

    def search(self, searcher: str, budget: int, seed: int = 0, params: dict[str, Any] | None = None,
               protected: tuple[int, ...] = (), use_prior: bool = True, progress: bool | str = False,
               share_memo: bool = True) -> SearchOutcome:
        """Run ``searcher`` on a fork of the dense scorer; cost as if it ran alone (module docstring).

        ``share_memo``: start from the losses earlier searches of this calibration computed, and resume from
        the prefix-cache states the last one left (results and counts are the same either way; only this
        process's work shrinks).
        """
        instance = get_searcher(searcher, progress=progress, **(params or {}))
        if self.store is not None and share_memo:
            self._refresh()
        # Singles never come from the shared memo: with the prior they are the prior (charged as
        # such), without it the searcher pays for every single it asks for.
        shared = {s: loss for s, (loss, _) in self.memo.items() if len(s) != 1} if share_memo else {}
        prior_singles = {frozenset([i]): loss for i, loss in enumerate(self.prior)} if use_prior else {}
        known = {**shared, **prior_singles}
        fork = self.scorer.fork(known=known, energy=self.energy[0] if share_memo and self.energy else None,
                                sink=self.store.put if self.store is not None else None,
                                reuse=self.warm if share_memo else None)
        if share_memo:  # its states stay for this condition's next search; another condition's go
            for other in self.session.calibrations() if self.session is not None else ():
                other.warm = None
            self.warm = fork
        torch.manual_seed(seed)
        result = instance.search(n_layers=fork.n_layers, budget=budget, score=fork, seed=seed,
                                 protected=frozenset(protected), prior=self.prior if use_prior else None)
        charged_prior = bool(result.info.get("used_given_prior"))
        singles = [frozenset([i]) for i in range(fork.n_layers)] if charged_prior else []
        losses = {**fork.memo, **known}
        replay = replay_cost([*singles, *fork.requests], losses, fork.n_layers, fork.cache.keep_best,
                             final_norm=fork.final_norm is not None, prefix_cache=fork.prefix_cache)
        prior_seconds = self.prior_seconds if charged_prior else 0.0
        reused = {s for s in fork.requests if s in shared}  # in the fork's memo from the start: never run here
        shared_search = sum(self.memo[s][1] for s in reused)
        if ENERGY in fork.requests and fork.energy_seconds is None and self.energy is not None:
            shared_search += self.energy[1]  # given to the fork: computed by another search, or stored
        shared_prior = max(0.0, self.prior_seconds - self.prior_seconds_here) if charged_prior else 0.0
        for s, sec in fork.set_seconds.items():
            self.memo.setdefault(s, (fork.memo[s], sec))
        computed = fork.computed_energy
        if computed is not None and self.energy is None:
            self.energy = (computed, fork.energy_seconds or 0.0)
            if self.store is not None:
                self.store.put_extra("energy", computed, self.energy[1])
        cost = {
            "evaluations": replay.evaluations,
            "search_evaluations": result.evaluations,
            "prior_evaluations": len(singles),
            "layer_forwards": replay.layer_forwards,
            "layer_backwards": replay.layer_backwards,
            "layer_forwards_here": fork.stats.layer_forwards,
            "seconds": self.dense_seconds + prior_seconds + result.seconds + shared_search,
            "search_seconds": result.seconds + shared_search,
            "shared_sets": len(reused),
            "shared_seconds": shared_search + shared_prior,
            "shared_prior_seconds": shared_prior,
            "prior_seconds": prior_seconds,
            "dense_seconds": self.dense_seconds,
            "exhausted_budget": result.exhausted,
            "counting": COUNTING,
        }
        return SearchOutcome(result, cost, use_prior)

    def _refresh(self) -> None:
        """Take what other processes of this condition stored since this calibration was built."""
        assert self.store is not None
        for s, entry in self.store.losses().items():
            self.memo.setdefault(s, entry)
        if self.energy is None and (stored := self.store.get_extra("energy")) is not None:
            self.energy = (tuple(stored[0]), stored[1])


@dataclass
class SearchOutcome:
    result: SearchResult
    cost: dict[str, Any]
    use_prior: bool

    @property
    def removed(self) -> tuple[int, ...]:
        return self.result.removed


def calibration_description(session: Session, objective: Objective) -> dict[str, Any]:
    """Everything a calibration loss depends on besides the removed set: the score store's key
    (:mod:`depthprune.scoring.score_store`). The kernels and thread count are in it because they change
    float rounding; the code and library versions so that older code's losses never match."""
    from depthprune.model.kernel_identity import kernel_record

    gpu = (torch.cuda.get_device_name(torch.device(session.device))
           if session.device.startswith("cuda") and torch.cuda.is_available() else None)
    return {"model": session.spec.id, "weights": session.weights, "profile": session.profile.name,
            "objective": objective.name, "params": objective.params(), "protocol": objective.protocol(),
            "batch_size": session.batch_size, "device": session.device, "dtype": session.dtype,
            "kernels": kernel_record(session.device), "gpu": gpu, "torch_threads": torch.get_num_threads(),
            "code": code_fingerprint(), "libraries": library_versions()}


def identity(session: Session, calib: Calibration, searcher: str, budget: int, seed: int,
             variant: str = "default", grid: str | None = None) -> Identity:
    params = calib.objective.params()
    return Identity(
        grid=grid, model=session.spec.id, weights=session.weights, profile=session.profile.name,
        objective=calib.name, dataset=params.get("dataset", ""), answer=params.get("answer"),
        calibration_seed=params.get("seed", 0), search=searcher, variant=variant, budget=budget,
        search_seed=seed, stand_in=session.stand_in,
    )


def settings(ident: Identity, objective_params: dict[str, Any], search_params: dict[str, Any],
             evaluation: EvalConfig | None, batch_size: int, device: str, dtype: str,
             protected: tuple[int, ...] = (), use_prior: bool = True) -> dict[str, Any]:
    """Everything that determines a result; its hash is the result's fingerprint."""
    return {
        "schema": SCHEMA, "identity": ident.to_dict(), "objective_params": objective_params,
        "search_params": search_params, "use_prior": use_prior, "protected": list(protected),
        "evaluation": asdict(evaluation) if evaluation is not None else None, "batch_size": batch_size,
        "device": device.split(":")[0], "dtype": dtype, "code": code_fingerprint(),
        "libraries": library_versions(),
    }


def make_result(session: Session, calib: Calibration, outcome: SearchOutcome, ident: Identity,
                evaluation: EvalResult | None = None, eval_config: EvalConfig | None = None,
                dense: EvalResult | None = None, cell: str | None = None,
                protected: tuple[int, ...] = ()) -> dict[str, Any]:
    """The one result schema (:mod:`depthprune.results.schema`) for a search (and its evaluation)."""
    r = outcome.result
    run_settings = settings(ident, calib.objective.params(), r.params, eval_config if evaluation else None,
                            session.batch_size, session.device, session.dtype, protected, outcome.use_prior)
    cost = dict(outcome.cost)
    if evaluation is not None:
        cost["eval_seconds"] = evaluation.seconds
        cost["eval_cached"] = evaluation.cached
    return {
        "schema": SCHEMA,
        "cell": cell,
        "identity": ident.to_dict(),
        "n_layers": calib.scorer.n_layers,
        "removed": list(r.removed),
        "calibration_loss": r.loss,
        "dense_calibration_loss": calib.dense_loss,
        "evaluated": evaluation is not None,
        "metrics": evaluation.metrics if evaluation is not None else {},
        "item_outcomes": evaluation.items if evaluation is not None else {},
        "item_clusters": evaluation.clusters if evaluation is not None else {},
        "window_nll": evaluation.windows if evaluation is not None else {},
        "dense_metrics": dense.metrics if dense is not None else {},
        "objective_params": calib.objective.params(),
        "calibration_protocol": calib.objective.protocol(),
        "search_params": r.params,
        "search_info": r.info,
        "evaluation_protocol": evaluation.protocol if evaluation is not None else {},
        "cost": cost,
        "prior": [x if math.isfinite(x) else None for x in calib.prior],
        "trace": [[sorted(s), loss] for s, loss in r.trace],
        "environment": environment(session.device, session.dtype),
        "fingerprint": fingerprint(run_settings),
        "settings": run_settings,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def check_budget(spec: ModelSpec, n_layers: int, budget: int, protected: tuple[int, ...] = ()) -> None:
    allowed = n_layers - len(set(protected))
    if not 0 <= budget < allowed:
        raise ValueError(f"budget {budget} is out of range: {spec.id} has {n_layers} layers"
                         f"{f' ({len(set(protected))} protected)' if protected else ''}; allowed 0..{allowed - 1}")


def count_layers(model: str | ModelSpec, allow_download: bool = False) -> int:
    """Layer count from ``config.json`` alone (no weights loaded)."""
    from transformers import AutoConfig

    spec = resolve(model)
    if spec.n_layers is not None and not spec.is_local:
        return spec.n_layers
    config = AutoConfig.from_pretrained(locate(spec, allow_download=allow_download))
    config = getattr(config, "text_config", None) or config
    return int(config.num_hidden_layers)


__all__ = ["COUNTING", "Calibration", "SearchOutcome", "Session", "check_budget", "calibration_description", "count_layers", "identity",
           "make_result", "resolve_dtype", "save_pruned", "settings"]


def save_pruned(session: Session, result: dict[str, Any], out_dir: str | Path) -> Path:
    """Delete the removed blocks and write a standard HF checkpoint (+ tokenizer, + the result).

    The in-memory model is pruned physically (:func:`depthprune.model.masking.prune_layers`); the
    session cannot search again afterwards.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prune_layers(session.model, result["removed"])
    session._calibrations.clear()  # their scorers saw the unpruned model
    session.model.save_pretrained(out)
    session.tokenizer.save_pretrained(out)
    write_json_atomic(out / "depthprune.json", to_json(result))
    if session.stand_in:  # a pruned stand-in is still a stand-in: it must never load as a real checkpoint
        write_json_atomic(out / STAND_IN_MARKER, {"pruned_from": session.spec.id, "weights": session.weights,
                                                  "removed": list(result["removed"])})
    return out
