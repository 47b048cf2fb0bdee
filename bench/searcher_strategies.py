"""Hypothesis strategies and generated objectives for the searcher property tests.

Objectives are exact, deterministic functions of the removal set, built from integer
terms so that sums are exact in floating point and ties are real ties:

    f(S) = const + Σ_{T ⊆ S, T in terms} w_T        (|T| = 1, 2 or 3)

optionally quantised to a grid (plateaus, many ties) and poisoned (some layers, pairs or
hash-selected sets give nan/inf). ``kind`` says which family an objective belongs to:
``additive`` (singletons only), ``pairwise`` (≤ 2: exactly quadratic), ``higher`` (with
triples), ``plateau`` (quantised), ``nonfinite`` (poisoned).

Hypothesis profiles (selected by the HYPOTHESIS_PROFILE environment variable, default
"ci") are registered here rather than in a conftest; the tests apply the selected one
through ``PROFILE`` without changing hypothesis's global default, so other test files
are unaffected:

* ``ci``: derandomized (reproducible), no example database, no deadline;
* ``thorough``: random, 10x the examples.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    derandomize=False,
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE", "ci")
PROFILE = settings.get_profile(PROFILE_NAME)


def examples(fraction: float, minimum: int = 3) -> int:
    """A test's example count as a fraction of the active profile's ``max_examples``."""
    return max(minimum, int(PROFILE.max_examples * fraction))


# --------------------------------------------------------------------------------------
# Objectives
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Objective:
    """f(S) = const + Σ w_T over terms T ⊆ S; then plateau quantisation and poison."""

    n_layers: int
    kind: str
    const: int
    terms: tuple[tuple[tuple[int, ...], int], ...]
    plateau: int = 0  # > 0: f is rounded down to a multiple of this (ties)
    poison_layers: tuple[tuple[int, float], ...] = ()  # layer -> nan/inf when removed
    poison_pairs: tuple[tuple[tuple[int, int], float], ...] = ()
    poison_hash: tuple[int, int] = (0, 0)  # (multiplier, threshold of 97): nan for some sets

    def __call__(self, removed: Iterable[int]) -> float:
        s = frozenset(removed)
        for layer, value in self.poison_layers:
            if layer in s:
                return value
        for (a, b), value in self.poison_pairs:
            if a in s and b in s:
                return value
        mult, threshold = self.poison_hash
        if threshold:
            mask = sum(1 << i for i in s)
            if (mask * mult) % 97 < threshold:
                return math.nan if mask % 2 else -math.inf if mask % 5 == 0 else math.inf
        value = self.const
        for t, w in self.terms:
            if all(i in s for i in t):
                value += w
        if self.plateau:
            value = (value // self.plateau) * self.plateau
        return float(value)

    @property
    def quadratic(self) -> bool:
        """Exactly quadratic in the removal vector (and everywhere finite)."""
        return self.kind in ("additive", "pairwise")

    def energy(self) -> tuple[list[float], list[list[float]]]:
        """The objective's singleton and pair terms as (h, J); exact iff ``quadratic``."""
        n = self.n_layers
        h = [0.0] * n
        j = [[0.0] * n for _ in range(n)]
        for t, w in self.terms:
            if len(t) == 1:
                h[t[0]] += w
            elif len(t) == 2:
                a, b = t
                j[a][b] += w / 2.0
                j[b][a] += w / 2.0
        return h, j


def rank(loss: float) -> float:
    """nan and ±inf are the worst possible loss (DESIGN.md: never a crash, never chosen)."""
    return loss if math.isfinite(loss) else math.inf


def brute_force(f, n_layers: int, budget: int, protected: frozenset[int]) -> tuple[tuple[int, ...], float]:  # noqa: ANN001
    """Independent ground truth: the lexicographically first set of minimal loss."""
    best: tuple[float, tuple[int, ...]] | None = None
    best_loss = math.nan
    for c in itertools.combinations([i for i in range(n_layers) if i not in protected], budget):
        loss = f(frozenset(c))
        key = (rank(loss), c)
        if best is None or key < best:
            best, best_loss = key, loss
    assert best is not None
    return best[1], best_loss


@st.composite
def objectives(draw, n_layers: int, kinds: Sequence[str] = ("additive", "pairwise", "higher", "plateau", "nonfinite")):  # noqa: ANN001, ANN201
    kind = draw(st.sampled_from(list(kinds)))
    weight = st.integers(-20, 60)
    terms: list[tuple[tuple[int, ...], int]] = [((i,), draw(weight)) for i in range(n_layers)]
    if kind != "additive" and n_layers >= 2:
        pairs = list(itertools.combinations(range(n_layers), 2))
        chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 12)))
        terms += [(p, draw(st.integers(-30, 40))) for p in sorted(chosen)]
    if kind in ("higher", "plateau", "nonfinite") and n_layers >= 3:
        triples = list(itertools.combinations(range(n_layers), 3))
        chosen = draw(st.lists(st.sampled_from(triples), unique=True, max_size=min(len(triples), 6)))
        terms += [(t, draw(st.integers(-30, 40))) for t in sorted(chosen)]
    plateau = draw(st.sampled_from([5, 10, 25, 1000])) if kind in ("plateau", "nonfinite") and draw(st.booleans()) else 0
    poison_layers: tuple[tuple[int, float], ...] = ()
    poison_pairs: tuple[tuple[tuple[int, int], float], ...] = ()
    poison_hash = (0, 0)
    if kind == "nonfinite":
        bad = st.sampled_from([math.nan, math.inf, -math.inf])
        layers = draw(st.lists(st.integers(0, n_layers - 1), unique=True, max_size=max(1, n_layers // 3)))
        poison_layers = tuple((i, draw(bad)) for i in sorted(layers))
        if n_layers >= 2:
            pairs = list(itertools.combinations(range(n_layers), 2))
            chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=3))
            poison_pairs = tuple((p, draw(bad)) for p in sorted(chosen))
        poison_hash = (draw(st.integers(1, 96)), draw(st.integers(0, 97)))
    return Objective(
        n_layers=n_layers,
        kind=kind,
        const=draw(st.integers(0, 100)),
        terms=tuple(terms),
        plateau=plateau,
        poison_layers=poison_layers,
        poison_pairs=poison_pairs,
        poison_hash=poison_hash,
    )


# --------------------------------------------------------------------------------------
# Hyper-parameter variants per searcher (defaults included); unknown searchers get {}
# --------------------------------------------------------------------------------------
PARAM_VARIANTS: dict[str, st.SearchStrategy[dict]] = {
    "beam": st.one_of(st.just({}), st.fixed_dictionaries({"beam_width": st.integers(1, 6)})),
    "ga": st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "population": st.integers(2, 8),
                "tournament": st.integers(1, 4),
                "mutation_rate": st.sampled_from([0.0, 0.3, 1.0]),
                "temperature": st.sampled_from([None, 0.5, 50.0]),
                "patience": st.integers(1, 4),
            }
        ).map(lambda d: {**d, "elitism": min(1, d["population"] - 1)}),
    ),
    "cbo": st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "top_k": st.integers(1, 10),
                "energy_source": st.sampled_from(["auto", "pairs"]),
                "pair_top": st.sampled_from([None, 0, 2, 4]),
                "enumerate_limit": st.sampled_from([0, 200_000]),  # 0: always the MILP
            }
        ),
    ),
    "rank": st.one_of(
        st.just({}),
        st.fixed_dictionaries({"q": st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0))}),
    ),
    "fbs": st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "max_segment_length": st.sampled_from([None, 1, 2, 3]),
                "segments_per_length": st.integers(0, 5),
                "candidates": st.integers(1, 6),
                "max_rounds": st.integers(0, 4),
            }
        ),
    ),
}


def param_variants(name: str) -> st.SearchStrategy[dict]:
    return PARAM_VARIANTS.get(name, st.just({}))


# --------------------------------------------------------------------------------------
# The score callable as the searchers see it (plain, with .many, with .energy)
# --------------------------------------------------------------------------------------
@dataclass
class CountingScore:
    """Wraps an objective; records every set the searcher asked for, in order."""

    f: Objective
    calls: list[frozenset[int]] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)

    def __call__(self, removed: frozenset[int]) -> float:
        assert isinstance(removed, frozenset), f"score called with {type(removed).__name__}, not frozenset"
        self.calls.append(removed)
        return self.f(removed)

    def block_influence(self, metric: str = "cosine") -> list[float]:
        """A structural ranking, as the engine offers one from hidden states (``bi`` needs it):
        here a fixed function of the objective's single-layer values, read without asking
        ``score`` (so it is neither a call nor an evaluation, as on the engine)."""
        values = [self.f(frozenset([i])) for i in range(self.f.n_layers)]
        return [v if math.isfinite(v) else math.inf for v in values]


class CountingScoreMany(CountingScore):
    def many(self, sets: list[frozenset[int]]) -> list[float]:
        self.batches.append(len(sets))
        return [self(s) for s in sets]


class CountingScoreEnergy(CountingScoreMany):
    def energy(self) -> tuple[list[float], list[list[float]]]:
        return self.f.energy()


def make_score(f: Objective, variant: str) -> CountingScore:
    return {"plain": CountingScore, "many": CountingScoreMany, "energy": CountingScoreEnergy}[variant](f)


@dataclass(frozen=True)
class Problem:
    f: Objective
    n_layers: int
    budget: int
    protected: frozenset[int]
    prior: tuple[float, ...] | None
    seed: int
    variant: str  # plain | many | energy

    def score(self) -> CountingScore:
        return make_score(self.f, self.variant)


@st.composite
def problems(draw, min_layers: int = 2, max_layers: int = 9, kinds: Sequence[str] | None = None):  # noqa: ANN001, ANN201
    """A search problem: objective, L ≤ max_layers, protected layers, budget, prior, seed.

    (L, M) is drawn from a list of configurations, which spreads examples over layer
    counts and budgets far better than independent integer draws (hypothesis favours
    small integers: L=2, M=1 would dominate). Budget 0 appears for two layer counts only.
    """
    configs = [(n, m) for n in range(min_layers, max_layers + 1) for m in range(1, n)]
    configs += [(min_layers, 0), (max_layers, 0)]
    n, budget = draw(st.sampled_from(configs))
    f = draw(objectives(n, kinds) if kinds else objectives(n))
    # Protected layers: at most 2, always leaving more than `budget` removable layers.
    protected = frozenset(draw(st.lists(st.integers(0, n - 1), unique=True, max_size=max(0, min(2, n - 1 - budget)))))
    prior = None
    if draw(st.booleans()):
        prior = tuple(f(frozenset([i])) for i in range(n))  # "computed once and shared"
    return Problem(
        f=f,
        n_layers=n,
        budget=budget,
        protected=protected,
        prior=prior,
        seed=draw(st.integers(0, 2**16)),
        variant=draw(st.sampled_from(["plain", "many", "energy"])),
    )
