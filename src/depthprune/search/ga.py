"""Prior-guided genetic algorithm on M-subsets.

Definition (DESIGN.md, searcher table; the details the table leaves open are ours and
are parameters below):

* prior: p_i = f({i}) (``ctx.prior()``, shared; scored and counted here if not given).
  Layer weights w_i ∝ softmax(−p_i/τ); a layer whose single removal is nan/inf gets
  weight 0 (it is still reachable by mutation).
* initial population: ``population`` distinct M-subsets, each drawn without
  replacement with P(i) ∝ w_i; scored as one batch.
* each generation: the ``elitism`` best sets survive unchanged; every other child comes
  from two parents chosen by tournament selection (``tournament`` sets drawn uniformly,
  the best wins); crossover samples M layers from the parents' union, prior-weighted;
  with probability ``mutation_rate`` a removed and a kept layer are swapped (both chosen
  uniformly). A child that was already scored (or already in this generation) is
  mutated again, up to ``max_retries`` times, so that the evaluation budget buys new
  sets. The children of one generation are scored as one batch.
* memoised: a set is never scored twice (SearchContext), and the answer is the best
  M-set scored.

Stops when ``max_evaluations`` distinct sets have been scored (respected exactly: the
last generation is cut short), when every M-subset has been scored, after
``max_generations`` generations, or after ``patience`` generations without a new set.
When the prior is neither given nor affordable within ``max_evaluations`` (it would
leave fewer than ``population`` evaluations), the prior is uniform.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from depthprune.common.params import check_ints
from depthprune.search.base import Bounds, EvaluationBudgetExhausted, SearchContext, Searcher, register, set_key


def prior_weights(prior: Sequence[float], items: Sequence[int], temperature: float | None) -> list[float]:
    """softmax(−prior/τ) over ``items`` (unnormalised, max weight 1); nan/inf -> 0.

    ``temperature=None`` uses τ = the standard deviation of the finite prior values of
    ``items`` (1 if they are all equal), so that the weights do not depend on the loss's
    units. All-non-finite priors give uniform weights.
    """
    values = [prior[i] for i in items]
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return [1.0] * len(items)
    tau = temperature
    if tau is None:
        mean = sum(finite) / len(finite)
        tau = math.sqrt(sum((v - mean) ** 2 for v in finite) / len(finite))
        if not tau > 0:
            tau = 1.0
    low = min(finite)
    return [math.exp(-(v - low) / tau) if math.isfinite(v) else 0.0 for v in values]


def weighted_sample(rng: random.Random, items: Sequence[int], weights: Sequence[float], k: int) -> list[int]:
    """``k`` distinct items, drawn one by one with P ∝ weight (uniform once weights run out)."""
    pool = list(items)
    w = list(weights)
    out: list[int] = []
    for _ in range(k):
        total = sum(w)
        if total > 0:
            r = rng.random() * total
            idx = len(pool) - 1
            acc = 0.0
            for j, wj in enumerate(w):
                acc += wj
                if r < acc:
                    idx = j
                    break
            while w[idx] <= 0:  # guard against rounding at the upper end
                idx -= 1
        else:
            idx = rng.randrange(len(pool))
        out.append(pool.pop(idx))
        w.pop(idx)
    return sorted(out)


PRIORS = ("single", "uniform")


def usable_prior(ctx: SearchContext, reserve: int, kind: str = "single") -> list[float]:
    """The shared prior if it is given or affordable while keeping ``reserve`` evaluations.

    ``kind="uniform"`` is the prior-ablation control: every removable layer equally likely,
    the single-removal losses neither asked for nor charged.
    """
    if kind == "uniform":
        ctx.info["prior"] = "uniform (ablation: prior='uniform')"
        return [math.inf if i in ctx.protected else 0.0 for i in range(ctx.n_layers)]
    cost = ctx.prior_cost()
    if ctx.remaining is None or cost == 0 or ctx.remaining >= cost + reserve:
        ctx.info["prior"] = "shared" if cost == 0 else "scored"
        return ctx.prior()
    ctx.info["prior"] = "uniform (not affordable within max_evaluations)"
    return [math.inf if i in ctx.protected else 0.0 for i in range(ctx.n_layers)]


@register
@dataclass
class GeneticSearcher(Searcher):
    """Prior-guided genetic algorithm (all defaults are ours; the paper gives none).

    Attributes:
        max_evaluations: evaluation budget; default 400, DESIGN.md's table ("e.g. 400").
        population: sets per generation; 16 (ours: ~25 generations within 400 evals).
        tournament: tournament size for parent selection; 3 (ours; a common choice).
        elitism: best sets copied unchanged into the next generation; 2 (ours).
        mutation_rate: probability that a child gets one removed/kept swap; 0.3 (ours).
        temperature: τ of the prior softmax; None = std of the finite prior values (ours,
            unit-free).
        max_retries: extra mutations tried to turn an already-scored child into a new
            set; 10 (ours).
        max_generations: hard cap on generations (guards max_evaluations=None); 1000.
        patience: stop after this many generations that produced no new set; 5 (ours).
        prior: "single" (the single-removal losses f({i}), shared) or "uniform" (the
            prior-ablation control: every layer equally likely, f({i}) not asked for).
    """

    name: ClassVar[str] = "ga"
    order: ClassVar[int] = 3  # position in report tables
    stochastic: ClassVar[bool] = True
    batch_decides: ClassVar[bool] = False  # its batches are chunks, not choices (Searcher)
    max_evaluations: int | None = 400
    population: int = 16
    tournament: int = 3
    elitism: int = 2
    mutation_rate: float = 0.3
    temperature: float | None = None
    max_retries: int = 10
    max_generations: int = 1000
    patience: int = 5
    prior: str = "single"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.prior not in PRIORS:
            raise ValueError(f"ga: prior must be one of {PRIORS}, got {self.prior!r}")
        check_ints("ga", self, {"population": 2, "tournament": 1, "elitism": 0, "max_retries": 0,
                                "max_generations": 0, "patience": 1})
        if self.elitism >= self.population:
            raise ValueError(f"ga: elitism ({self.elitism}) must be < population ({self.population})")
        if not 0.0 <= self.mutation_rate <= 1.0:
            raise ValueError(f"ga: mutation_rate must be in [0, 1], got {self.mutation_rate!r}")
        if self.temperature is not None and not self.temperature > 0:
            raise ValueError(f"ga: temperature must be > 0 or None, got {self.temperature!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """The charged prior, then the first population .. the evaluation limit."""
        space = math.comb(n_layers, budget)
        limit = space if self.max_evaluations is None else min(space, self.max_evaluations)
        return Bounds(n_layers + min(self.population, space), n_layers + limit, {1: n_layers, budget: limit})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int | None:
        n = n_layers - n_protected
        space = math.comb(n, budget)
        bound = (n if budget > 1 else 0) + space  # prior singles + every M-set
        return bound if self.max_evaluations is None else min(bound, self.max_evaluations)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        m = ctx.budget
        cands = ctx.candidates
        if m == 0:
            return frozenset()
        rng = ctx.rng
        space = math.comb(len(cands), m)
        prior = usable_prior(ctx, reserve=self.population, kind=self.prior)
        weights = prior_weights(prior, cands, self.temperature)
        wmap = dict(zip(cands, weights))

        def scored(s: frozenset[int]) -> bool:
            return ctx.seen(s)

        def n_scored_full() -> int:
            return sum(1 for s, _ in ctx.trace if len(s) == m)

        def mutate(s: frozenset[int]) -> frozenset[int]:
            kept = [i for i in cands if i not in s]
            if not kept:
                return s
            out = rng.choice(sorted(s))
            into = rng.choice(kept)
            return (s - {out}) | {into}

        # Initial population: distinct prior-weighted samples.
        pop: list[frozenset[int]] = []
        target = min(self.population, space)
        tries = 0
        while len(pop) < target and tries < 50 * self.population:
            tries += 1
            s = frozenset(weighted_sample(rng, cands, weights, m))
            if s not in pop:
                pop.append(s)
        while len(pop) < target:  # prior too peaked to give distinct sets: mutate
            s = mutate(pop[rng.randrange(len(pop))])
            if s not in pop:
                pop.append(s)
        losses = ctx.score_many(pop)
        scored_pop = sorted(zip(pop, losses), key=lambda sl: set_key(*sl))

        stall = 0
        generations = 0
        for _gen in range(self.max_generations):
            if n_scored_full() >= space or stall >= self.patience:
                break
            if ctx.remaining == 0:
                raise EvaluationBudgetExhausted
            generations += 1
            ctx.info["generations"] = generations
            elites = [s for s, _ in scored_pop[: self.elitism]]
            children: list[frozenset[int]] = []
            n_children = min(self.population, space) - len(elites)
            for _ in range(max(n_children, 0)):
                a = self._tournament(rng, scored_pop)
                b = self._tournament(rng, scored_pop)
                union = sorted(a | b)
                child = frozenset(weighted_sample(rng, union, [wmap[i] for i in union], m))
                if rng.random() < self.mutation_rate:
                    child = mutate(child)
                for _retry in range(self.max_retries):
                    if not scored(child) and child not in children:
                        break
                    child = mutate(child)
                children.append(child)
            new = [c for c in dict.fromkeys(children) if not scored(c)]
            stall = 0 if new else stall + 1
            child_losses = ctx.score_many(children)
            merged = dict(zip(elites, [ctx.score(s) for s in elites]))
            merged.update(zip(children, child_losses))
            scored_pop = sorted(merged.items(), key=lambda sl: set_key(*sl))
        ctx.info["generations"] = generations
        best = ctx.best()
        assert best is not None
        return best[0]

    def _tournament(self, rng: random.Random, scored_pop: list[tuple[frozenset[int], float]]) -> frozenset[int]:
        picks = [rng.randrange(len(scored_pop)) for _ in range(self.tournament)]
        # scored_pop is sorted best-first, so the smallest index wins the tournament.
        return scored_pop[min(picks)][0]
