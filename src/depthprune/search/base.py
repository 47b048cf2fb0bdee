"""The searcher protocol: minimise an abstract loss over removal sets.

Searchers never see a model. They receive ``score``, a callable from a frozenset of
layer indices to a float (lower is better, may be nan/inf), and return the best
removal set of exactly ``budget`` layers they could find. Everything that is the same
for every searcher lives here, so each algorithm file holds only its algorithm:

* argument validation with errors that say what is allowed;
* memoisation by set (a repeated set is never scored twice nor counted twice);
* the evaluation budget (``max_evaluations``), respected exactly;
* nan/inf handling (they rank as the worst possible candidate, never crash);
* deterministic tie-breaking (equal losses: the lexicographically smaller set wins);
* the trace, the counters, wall time and an optional tqdm progress bar.

A ``score`` callable may also offer ``score.many(list_of_sets) -> list[float]``; the
scoring engine does, so that a batch of candidates shares prefix computations. Plain
callables work unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from tqdm.auto import tqdm

from depthprune.common.params import check_ints
from depthprune.common.plugins import Registry

ScoreFn = Callable[[frozenset[int]], float]
#: the ways the planner counts a searcher's layer-forwards (:attr:`Searcher.planned`)
Planned = Literal["simulated", "bound", "fixed"]
PLANNED: tuple[Planned, ...] = ("simulated", "bound", "fixed")


@dataclass(frozen=True)
class Bounds:
    """Distinct sets a grid cell's cost counts, from the settings alone
    (:meth:`depthprune.search.base.Searcher.evaluation_bounds`),
    and the most of each size. Planning (depthprune.plan) and the rehearsal read it; the searcher owns it."""

    low: int
    high: int
    sizes: dict[int, int]  # set size -> most sets of that size (the dense set is size 0)
    energy: bool = False  # cbo's gate-gradient passes (scoring.Scorer.energy)

    @property
    def exact(self) -> bool:
        """The settings fix the count (the layer-forwards still depend on which layers the losses remove)."""
        return self.low == self.high


class EvaluationBudgetExhausted(Exception):
    """Raised inside a search when ``max_evaluations`` distinct sets have been scored."""


def rank_key(loss: float) -> float:
    """Sort key for a loss: nan and ±inf rank as +inf, the worst possible candidate.

    -inf is not a loss any objective can legitimately reach (it comes from overflow, e.g.
    a margin with a −inf log-probability), so it is as bad as nan, never the best.
    """
    if loss is None or not math.isfinite(loss):
        return math.inf
    return loss


def set_key(removed: Iterable[int], loss: float) -> tuple[float, tuple[int, ...]]:
    """Total order used for every 'best' decision: loss first, then the sorted set."""
    return (rank_key(loss), tuple(sorted(removed)))


@dataclass(frozen=True)
class SearchResult:
    """What every searcher returns (stable API)."""

    removed: tuple[int, ...]
    loss: float
    evaluations: int
    trace: list[tuple[frozenset[int], float]]
    searcher: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    seconds: float = 0.0
    exhausted: bool = False  # True when max_evaluations stopped the search early
    info: dict[str, Any] = field(default_factory=dict)  # what the searcher resolved/observed

    def to_dict(self) -> dict[str, Any]:
        return {
            "removed": list(self.removed),
            "loss": self.loss,
            "evaluations": self.evaluations,
            "searcher": self.searcher,
            "params": self.params,
            "seed": self.seed,
            "seconds": self.seconds,
            "exhausted": self.exhausted,
            "info": self.info,
        }


class SearchContext:
    """The memoised, counted, budgeted view of ``score`` that a searcher works with."""

    def __init__(
        self,
        n_layers: int,
        budget: int,
        score: ScoreFn,
        seed: int,
        protected: frozenset[int],
        prior: Sequence[float] | None,
        max_evaluations: int | None,
        progress: bool | str,
        expected_evaluations: int | None = None,
    ) -> None:
        self.n_layers = n_layers
        self.budget = budget
        self.protected = protected
        self.candidates: tuple[int, ...] = tuple(i for i in range(n_layers) if i not in protected)
        self.rng = random.Random(seed)
        self.max_evaluations = max_evaluations
        self._score = score
        self._score_many = getattr(score, "many", None)
        # Optional model-side quadratic energy ``score.energy() -> (h, J)`` (duck-typed like
        # ``score.many``); None for a plain callable. Used by ``cbo``.
        self.energy: Callable[[], tuple[Any, Any]] | None = getattr(score, "energy", None)
        # Optional structural ranking ``score.block_influence(metric) -> [L floats]`` from the
        # dense model's hidden states (duck-typed the same way). Used by ``bi``.
        self.block_influence: Callable[[str], Sequence[float]] | None = getattr(score, "block_influence", None)
        # Optional ``score.recorded_gp(k) -> {parameter name: value} | None``: the k-th GP fit a recorded
        # run of ``bo`` reached, offered by a replay (depthprune.verify.replay) so that bo's path does not
        # rest on this machine's optimiser; None for a plain callable (then bo fits).
        self.recorded_gp: Callable[[int], dict[str, Any] | None] | None = getattr(score, "recorded_gp", None)
        self._memo: dict[frozenset[int], float] = {}
        self.trace: list[tuple[frozenset[int], float]] = []
        self._best: tuple[tuple[float, tuple[int, ...]], frozenset[int]] | None = None
        self._prior: list[float] | None = list(prior) if prior is not None else None
        self.prior_given = prior is not None
        self.prior_used = False  # did the searcher ask for the prior (so its cost is the searcher's)?
        # Facts a searcher resolved at run time (e.g. which energy source it used); they
        # are copied into SearchResult.info. Hyper-parameters belong in params, not here.
        self.info: dict[str, Any] = {}
        total = expected_evaluations
        if max_evaluations is not None:
            total = min(total, max_evaluations) if total is not None else max_evaluations
        desc = progress if isinstance(progress, str) else "search"
        self._bar = tqdm(total=total, desc=desc, unit="eval", disable=not progress, leave=False)

    # -- scoring -------------------------------------------------------------------
    @property
    def evaluations(self) -> int:
        return len(self.trace)

    @property
    def remaining(self) -> int | None:
        if self.max_evaluations is None:
            return None
        return self.max_evaluations - self.evaluations

    def seen(self, removed: Iterable[int]) -> bool:
        return frozenset(removed) in self._memo

    def _check(self, s: frozenset[int]) -> None:
        if s & self.protected:
            raise ValueError(f"searcher asked to score protected layers {sorted(s & self.protected)}")
        if any(i < 0 or i >= self.n_layers for i in s):
            raise ValueError(f"searcher asked to score out-of-range layers in {sorted(s)}")

    def _record(self, s: frozenset[int], loss: float) -> float:
        loss = float(loss)
        self._memo[s] = loss
        self.trace.append((s, loss))
        self._bar.update(1)
        if len(s) == self.budget:
            key = set_key(s, loss)
            if self._best is None or key < self._best[0]:
                self._best = (key, s)
        return loss

    def score(self, removed: Iterable[int]) -> float:
        """Loss of one removal set (memoised; counts once per distinct set)."""
        s = frozenset(removed)
        if s in self._memo:
            return self._memo[s]
        self._check(s)
        if self.max_evaluations is not None and self.evaluations >= self.max_evaluations:
            raise EvaluationBudgetExhausted
        return self._record(s, self._score(s))

    def score_many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        """Losses of several sets; new ones go to ``score.many`` in one batch when offered.

        Under ``max_evaluations`` only as many new sets as the budget allows are scored,
        in the given order, then EvaluationBudgetExhausted is raised.
        """
        frozen = [frozenset(s) for s in sets]
        new: list[frozenset[int]] = []
        for s in frozen:
            if s not in self._memo and s not in new:
                self._check(s)
                new.append(s)
        exhausted = False
        remaining = self.remaining
        if remaining is not None and len(new) > remaining:
            new = new[:remaining]
            exhausted = True
        if new:
            if self._score_many is not None and len(new) > 1:
                losses = list(self._score_many(new))
                if len(losses) != len(new):
                    raise RuntimeError(f"score.many returned {len(losses)} losses for {len(new)} sets")
            else:
                losses = [self._score(s) for s in new]
            for s, loss in zip(new, losses):
                self._record(s, loss)
        if exhausted:
            raise EvaluationBudgetExhausted
        return [self._memo[s] for s in frozen]

    # -- shared helpers --------------------------------------------------------------
    def prior(self) -> list[float]:
        """Per-layer single-removal losses f({i}); scored here (and counted) if not given.

        Protected layers get +inf: they can never be removed.
        """
        self.prior_used = True
        if self._prior is None:
            singles = [frozenset([i]) for i in self.candidates]
            losses = self.score_many(singles)
            prior = [math.inf] * self.n_layers
            for i, loss in zip(self.candidates, losses):
                prior[i] = rank_key(loss)
            self._prior = prior
        return [math.inf if i in self.protected else rank_key(v) for i, v in enumerate(self._prior)]

    def prior_cost(self) -> int:
        """How many new evaluations :meth:`prior` would cost now (0 if given or known)."""
        if self._prior is not None:
            return 0
        return sum(1 for i in self.candidates if frozenset([i]) not in self._memo)

    def best(self) -> tuple[frozenset[int], float] | None:
        """The best full-budget set scored so far (nan/inf only if nothing finite was seen)."""
        if self._best is None:
            return None
        s = self._best[1]
        return s, self._memo[s]

    def close(self) -> None:
        self._bar.close()


def validate_arguments(
    n_layers: int,
    budget: int,
    protected: Iterable[int],
    prior: Sequence[float] | None,
) -> frozenset[int]:
    """Check the public arguments; return ``protected`` as a frozenset.

    The rule: 0 <= budget < n_layers - len(protected), i.e. at least one removable
    layer always stays (a model is never pruned to nothing).
    """
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"n_layers must be a positive integer, got {n_layers!r}")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ValueError(f"budget must be an integer, got {budget!r}")
    prot = frozenset(protected)
    bad = sorted(i for i in prot if not isinstance(i, int) or i < 0 or i >= n_layers)
    if bad:
        raise ValueError(f"protected layers {bad} are outside 0..{n_layers - 1}")
    allowed = n_layers - len(prot)
    if budget < 0 or budget >= allowed:
        raise ValueError(
            f"budget must be in 0..{allowed - 1} (n_layers={n_layers}, {len(prot)} protected), got {budget}"
        )
    if prior is not None and len(prior) != n_layers:
        raise ValueError(f"prior must have one loss per layer ({n_layers}), got {len(prior)}")
    return prot


@dataclass
class Searcher(ABC):
    """Base class: subclasses are dataclasses whose fields are their hyper-parameters.

    Subclasses implement :meth:`run`, which scores sets through ``ctx`` and returns the
    chosen removal set. ``max_evaluations`` (None = unlimited) is enforced by the
    context; when it runs out, the best full-budget set seen so far is returned.
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100  # position in report tables (cheap to dear); ties by name
    stochastic: ClassVar[bool] = False  # does the seed change the search? (seed controls vary it)
    #: is the best of each batch it scores a choice of the search (greedy's step: turn it and the path turns)?
    #: False where a batch is a chunk of an enumeration, a population or a design (rank, exhaustive, GA, BO):
    #: REPORT's "how firmly each set is decided" counts only decisions that can change the answer
    batch_decides: ClassVar[bool] = True
    #: how ``depthprune plan`` counts its layer-forwards (:data:`PLANNED`): ``simulated``, run on synthetic loss
    #: landscapes; ``bound``, its :meth:`evaluation_bounds` scaled by the archives' measured ratio (BO: a GP fit per
    #: evaluation is too dear to simulate); ``fixed``, no loss search, the settings fix what it scores (bi)
    planned: ClassVar[Planned] = "simulated"
    #: what, besides the losses, steers the search and follows the machine's floating-point kernels, so that the
    #: same losses can ask for other sets on other kernels ("" where nothing does; bo: its GP fits). A grid
    #: cell's removed set is then checked exactly only against a reference made on the same kernels
    #: (:func:`depthprune.grid.reference.not_checkable`)
    kernel_sensitive: ClassVar[str] = ""
    #: why ``depthprune plan --check`` cannot re-count its cost from a result's recorded losses ("" where it can)
    not_recountable: ClassVar[str] = ""
    max_evaluations: int | None = None
    progress: bool | str = False

    def __post_init__(self) -> None:
        """Range checks at construction (bad input fails before a model is loaded: depthprune.common.params);
        a subclass with checks of its own calls this first."""
        check_ints(self.name, self, {"max_evaluations": 1}, optional=("max_evaluations",))

    def params(self) -> dict[str, Any]:
        """Hyper-parameters as recorded in results (progress is presentation, not a parameter)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "progress"}

    @classmethod
    def turned_cut_answer(cls, removed: Sequence[int], chosen: Sequence[int], rival: Sequence[int]
                          ) -> tuple[int, ...] | None:
        """The set this searcher would have removed had rounding turned the prior's cut (``chosen`` kept out of
        the set, ``rival`` in), where that follows without searching again; None where the search must be
        followed (:mod:`depthprune.verify.rivals`). Only a searcher whose answer is the cut itself knows it."""
        return None

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int | None:
        """Upper bound used to size the progress bar; None if unknown."""
        return None

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """Fewest and most distinct sets a grid cell's cost counts (the prior given and charged when used,
        nothing protected), derived from this searcher's code: planning and the rehearsal read it."""
        raise NotImplementedError(f"searcher {self.name!r} has no planning rule (Searcher.evaluation_bounds)")

    @abstractmethod
    def run(self, ctx: SearchContext) -> Iterable[int]:
        """Search; return the removal set (exactly ctx.budget unprotected layers)."""

    def search(
        self,
        n_layers: int,
        budget: int,
        score: ScoreFn,
        seed: int = 0,
        protected: Iterable[int] = frozenset(),
        prior: Sequence[float] | None = None,
    ) -> SearchResult:
        prot = validate_arguments(n_layers, budget, protected, prior)
        if self.max_evaluations is not None and self.max_evaluations < 1:
            raise ValueError(f"max_evaluations must be >= 1 or None, got {self.max_evaluations}")
        ctx = SearchContext(
            n_layers,
            budget,
            score,
            seed,
            prot,
            prior,
            self.max_evaluations,
            self.progress,
            self.expected_evaluations(n_layers, budget, len(prot)),
        )
        start = time.perf_counter()
        exhausted = False
        try:
            try:
                # Budget 0 has one answer, the empty set: nothing to search (it is still
                # scored below, once, so that the result's loss is measured).
                chosen = frozenset(self.run(ctx)) if budget > 0 else frozenset()
            except EvaluationBudgetExhausted:
                exhausted = True
                found = ctx.best()
                if found is None:
                    raise RuntimeError(
                        f"{self.name}: max_evaluations={self.max_evaluations} ran out before any "
                        f"set of {budget} layers was scored; raise max_evaluations"
                    ) from None
                chosen = found[0]
            if len(chosen) != budget or chosen & prot:
                raise RuntimeError(f"{self.name} returned an invalid set {sorted(chosen)}")
            if not ctx.seen(chosen):
                # A searcher may construct its answer without scoring it (e.g. oneshot);
                # the result's loss is always a measured one.
                try:
                    ctx.score(chosen)
                except EvaluationBudgetExhausted:
                    exhausted = True
                    found = ctx.best()
                    if found is None:
                        raise RuntimeError(
                            f"{self.name}: max_evaluations={self.max_evaluations} left no evaluation "
                            f"to score the chosen set of {budget} layers; raise max_evaluations"
                        ) from None
                    chosen = found[0]
            loss = ctx._memo[chosen]
            if not math.isfinite(loss):
                # nan/inf is the worst possible candidate: never return it while a
                # full-budget set with a finite loss has been scored.
                found = ctx.best()
                if found is not None and math.isfinite(found[1]):
                    chosen, loss = found
        finally:
            ctx.close()
        return SearchResult(
            removed=tuple(sorted(chosen)),
            loss=loss,
            evaluations=ctx.evaluations,
            trace=list(ctx.trace),
            searcher=self.name,
            params=self.params(),
            seed=seed,
            seconds=time.perf_counter() - start,
            exhausted=exhausted,
            info={**ctx.info, "used_given_prior": ctx.prior_given and ctx.prior_used},
        )


def argmin_set(ctx: SearchContext, sets: Sequence[frozenset[int]]) -> tuple[frozenset[int], float]:
    """Score ``sets`` (as one batch) and return the best with its loss (deterministic ties)."""
    losses = ctx.score_many(sets)
    best = min(zip(sets, losses), key=lambda sl: set_key(*sl))
    return best


#: name -> searcher class. Each module of ``depthprune.search`` registers its class with
#: ``@register``; ``depthprune.search`` imports them all (:meth:`Registry.discover`).
SEARCHERS: Registry[type[Searcher]] = Registry("searcher")
register = SEARCHERS.register
