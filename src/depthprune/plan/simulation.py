"""Searchers run on loss landscapes, their requests counted as results count them: synthetic
landscapes for planning, a result's recorded losses for checking a run (:func:`check_result`)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from depthprune.results.schema import Result
from depthprune.scoring.request_cost import ENERGY, Request, replay_cost
from depthprune.search import get_searcher

Losses = Callable[[frozenset[int]], float]


class SyntheticLandscape:
    """A seeded stand-in for a calibration loss over removal sets (ours).

    f(S) = f0 + Σ_{i∈S} p_i + γ Σ_{adjacent i, i+1 ∈ S} √(p_i p_{i+1}) + ε(S): single-removal
    losses p high at the first and last blocks and low in between (the usual shape), with
    log-normal noise; removing neighbours costs extra, so f is not additive; ε < 1e-6 breaks ties.
    """

    def __init__(self, n_layers: int, seed: int, f0: float = 2.0, gamma: float = 0.5) -> None:
        rng = random.Random(seed)
        last = n_layers - 1
        self.p = [(0.05 + 2.0 * math.exp(-i / 1.5) + 1.0 * math.exp(-(last - i))) * math.exp(0.6 * rng.gauss(0, 1))
                  for i in range(n_layers)]
        self.f0, self.gamma, self.seed = f0, gamma, seed

    def __call__(self, s: frozenset[int]) -> float:
        layers = sorted(s)
        value = self.f0 + sum(self.p[i] for i in layers)
        value += self.gamma * sum(math.sqrt(self.p[i] * self.p[i + 1]) for i in layers if i + 1 in s)
        return value + 1e-7 * random.Random(hash((self.seed, *layers))).random()


class NotRecorded(KeyError):
    """A simulated searcher asked for a set the recorded run never scored (its path differs)."""


class RecordedLosses:
    """The losses a run recorded; asking for any other set raises :class:`NotRecorded`."""

    def __init__(self, losses: dict[frozenset[int], float]) -> None:
        self.losses = losses

    def __call__(self, s: frozenset[int]) -> float:
        try:
            return self.losses[s]
        except KeyError:
            raise NotRecorded(f"the run never scored {sorted(s)}") from None


def recorded_losses(result: Mapping[str, Any]) -> RecordedLosses:
    """A result's dense loss, prior (single removals) and trace as a loss function."""
    losses: dict[frozenset[int], float] = {frozenset(): float(result["dense_calibration_loss"])}
    losses.update({frozenset([i]): math.nan if v is None else float(v) for i, v in enumerate(result["prior"])})
    losses.update({frozenset(s): math.nan if v is None else float(v) for s, v in result["trace"]})
    return RecordedLosses(losses)


class _RecordingScore:
    """The score callable a searcher gets, logging requests exactly as :class:`~depthprune.scoring.scorer.Scorer`
    does (every call, memo hits included; ``energy()`` logs ENERGY, then the dense set and the singles)."""

    def __init__(self, losses: Losses, n_layers: int) -> None:
        self.losses, self.n_layers = losses, n_layers
        self.requests: list[Request] = []
        self.memo: dict[frozenset[int], float] = {}

    def __call__(self, removed: Iterable[int]) -> float:
        s = frozenset(removed)
        self.requests.append(s)
        if s not in self.memo:
            self.memo[s] = float(self.losses(s))
        return self.memo[s]

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]

    def energy(self) -> tuple[list[float], list[list[float]]]:
        if isinstance(self.losses, RecordedLosses):
            raise NotRecorded("cbo's energy comes from gate gradients, which a result does not record")
        self.requests.append(ENERGY)
        base = self(frozenset())
        h = [self(frozenset([i])) - base for i in range(self.n_layers)]
        f = self.losses  # pair terms from the landscape itself (the Scorer gets them from gradients)
        j = [[0.0 if a == b else (f(frozenset([a, b])) - h[a] - h[b] - base) / 2.0 for b in range(self.n_layers)]
             for a in range(self.n_layers)]
        return h, j


@dataclass(frozen=True)
class Simulated:
    """What one run of a searcher on a loss landscape costs, counted as results count it."""

    evaluations: int
    layer_forwards: int
    layer_backwards: int
    removed: tuple[int, ...]


def simulate(searcher: str, params: dict[str, Any], n_layers: int, budget: int, losses: Losses, seed: int = 0,
             use_prior: bool = True, protected: Sequence[int] = (), keep_best: int = 4) -> Simulated:
    """Run ``searcher`` on ``losses`` and count its requests with :func:`~depthprune.scoring.request_cost.replay_cost`.

    Mirrors :meth:`depthprune.recipe.Calibration.search`: the prior is given when ``use_prior``
    and charged (its singles first) when the searcher asks for it.
    """
    score = _RecordingScore(losses, n_layers)
    prior = [float(losses(frozenset([i]))) for i in range(n_layers)] if use_prior else None
    result = get_searcher(searcher, **params).search(n_layers=n_layers, budget=budget, score=score, seed=seed,
                                                     protected=frozenset(protected), prior=prior)
    singles = [frozenset([i]) for i in range(n_layers)] if result.info.get("used_given_prior") else []
    known = {**score.memo, **{s: float(losses(s)) for s in singles}}
    replay = replay_cost([*singles, *score.requests], known, n_layers, keep_best, final_norm=True)
    return Simulated(replay.evaluations, replay.layer_forwards, replay.layer_backwards, result.removed)


def check_result(result: Result, keep_best: int = 4) -> tuple[Simulated, dict[str, int]]:
    """(the planner's count on the run's recorded losses, the run's own count).

    Equal for every searcher whose path is a function of the losses; raises
    :class:`NotRecorded` where the simulated searcher leaves the recorded path.
    """
    settings = result.get("settings", {})
    ident = result.identity
    sim = simulate(ident.search, result["search_params"], int(result["n_layers"]), int(ident.budget),
                   recorded_losses(result), seed=int(ident.search_seed),
                   use_prior=bool(settings.get("use_prior", True)), protected=settings.get("protected", ()),
                   keep_best=keep_best)
    cost = result["cost"]
    return sim, {"evaluations": int(cost["evaluations"]), "layer_forwards": int(cost["layer_forwards"]),
                 "layer_backwards": int(cost["layer_backwards"])}
