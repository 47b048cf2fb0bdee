"""Example-based unit tests of the searchers (fast; the properties live in bench/)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import pytest

from depthprune.search import SEARCHERS, get_searcher
from depthprune.search.base import rank_key, set_key

NEW = ("beam", "ga", "bo", "cbo", "fbs")


# ---------------------------------------------------------------------------------------
# objectives
# ---------------------------------------------------------------------------------------
class Quadratic:
    """f(S) = c + Σ h_i + Σ_{i<j} J_ij over S (exactly quadratic); counts calls."""

    def __init__(self, n: int, seed: int, scale_j: float = 3.0, integer: bool = False) -> None:
        rng = random.Random(seed)
        draw = (lambda a, b: rng.randint(int(a), int(b))) if integer else rng.uniform
        self.n = n
        self.h = [draw(0, 10) for _ in range(n)]
        self.j = {(a, b): draw(-scale_j, scale_j) for a in range(n) for b in range(a + 1, n)}
        self.calls: list[frozenset[int]] = []

    def __call__(self, s: frozenset[int]) -> float:
        self.calls.append(s)
        x = sorted(s)
        return 1.0 + sum(self.h[i] for i in x) + sum(self.j[(a, b)] for a, b in itertools.combinations(x, 2))


class QuadraticWithEnergy(Quadratic):
    def energy(self):  # noqa: ANN201
        jm = [[0.0] * self.n for _ in range(self.n)]
        for (a, b), v in self.j.items():
            jm[a][b] = jm[b][a] = v / 2.0
        return list(self.h), jm


class Many:
    """Wraps a score; records the sizes of the batches handed to ``many``."""

    def __init__(self, f) -> None:  # noqa: ANN001
        self.f = f
        self.batches: list[int] = []

    def __call__(self, s: frozenset[int]) -> float:
        return self.f(s)

    def many(self, sets: list[frozenset[int]]) -> list[float]:
        self.batches.append(len(sets))
        return [self.f(s) for s in sets]


def optimum(f, n: int, m: int, protected=frozenset()) -> tuple[tuple[int, ...], float]:  # noqa: ANN001
    best = min(
        (rank_key(f(frozenset(c))), c) for c in itertools.combinations([i for i in range(n) if i not in protected], m)
    )
    return best[1], best[0]


def fast(name: str, **params):  # noqa: ANN003, ANN201
    """Searchers with test-sized settings (BO: a small budget)."""
    if name == "bo":
        pytest.importorskip("botorch")  # the optional [bo] extra
        params.setdefault("max_evaluations", 30)
        params.setdefault("n_prior_samples", 32)
    return get_searcher(name, **params)


# ---------------------------------------------------------------------------------------
# every new searcher
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NEW)
def test_finds_the_optimum_of_a_tiny_interacting_objective(name: str) -> None:
    f = Quadratic(7, seed=3)
    best_set, best = optimum(f, 7, 2)
    r = fast(name).search(n_layers=7, budget=2, score=f, seed=0)
    assert r.removed == best_set and r.loss == pytest.approx(best)


@pytest.mark.parametrize("name", NEW)
def test_params_are_documented_defaulted_dataclass_fields(name: str) -> None:
    cls = SEARCHERS[name]
    doc = cls.__doc__ or ""
    for fld in dataclasses.fields(cls):
        if fld.name == "progress":
            continue
        assert fld.default is not dataclasses.MISSING, f"{name}.{fld.name} has no default"
        if fld.name != "max_evaluations" or name in ("ga", "bo"):
            assert f"{fld.name}:" in doc, f"{name}.{fld.name} is not documented in the class docstring"
    r = fast(name).search(n_layers=6, budget=2, score=Quadratic(6, 0), seed=0)
    assert r.params == fast(name).params() and "progress" not in r.params


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("beam", {"beam_width": 0}),
        ("ga", {"population": 1}),
        ("ga", {"elitism": 16}),
        ("ga", {"mutation_rate": 1.5}),
        ("bo", {"batch_size": 0}),
        ("bo", {"initial_design": 0}),
        ("cbo", {"energy_source": "gradients"}),
        ("cbo", {"top_k": 0}),
        ("fbs", {"candidates": 0}),
        ("fbs", {"max_segment_length": 0}),
    ],
)
def test_bad_hyper_parameters_raise_value_error(name: str, bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        get_searcher(name, **bad)


@pytest.mark.parametrize("name", NEW)
def test_batches_go_through_score_many(name: str) -> None:
    score = Many(Quadratic(9, seed=1))
    fast(name).search(n_layers=9, budget=3, score=score, seed=0)
    assert score.batches and max(score.batches) > 1, f"{name} never scored a batch: {score.batches}"


@pytest.mark.parametrize("name", NEW)
def test_nan_and_inf_never_crash_and_are_avoided(name: str) -> None:
    base = Quadratic(8, seed=5)

    def f(s: frozenset[int]) -> float:
        if 2 in s:
            return math.nan
        if {4, 5} <= s:
            return math.inf
        if 6 in s and len(s) == 3 and 0 in s:
            return -math.inf  # overflow: as bad as nan, never "the best"
        return base(s)

    r = fast(name).search(n_layers=8, budget=3, score=f, seed=0)
    assert math.isfinite(r.loss) and 2 not in r.removed and not {4, 5} <= set(r.removed)
    assert not {0, 6} <= set(r.removed)


@pytest.mark.parametrize("name", NEW)
def test_all_non_finite_objective_still_returns_a_valid_set(name: str) -> None:
    r = fast(name).search(n_layers=6, budget=2, score=lambda s: math.nan if s else 0.0, seed=0)
    assert len(r.removed) == 2 and math.isnan(r.loss)


@pytest.mark.parametrize("name", NEW)
def test_protected_layers_are_never_scored(name: str) -> None:
    f = Quadratic(9, seed=2)
    r = fast(name).search(n_layers=9, budget=3, score=f, seed=0, protected={0, 8})
    assert not {0, 8} & set(r.removed)
    assert all(not {0, 8} & s for s in f.calls)
    # The unprotected optimum removes layer 8, so protection changes the answer: every
    # searcher here must find the best set among the allowed ones (7 choose 3 = 35, small
    # enough for all of them), with that set's own loss, not merely avoid layers 0 and 8.
    free_set, _ = optimum(Quadratic(9, seed=2), 9, 3)
    best_set, best = optimum(Quadratic(9, seed=2), 9, 3, protected={0, 8})
    assert 8 in free_set and best_set != free_set
    assert r.removed == best_set and r.loss == best


# ---------------------------------------------------------------------------------------
# beam
# ---------------------------------------------------------------------------------------
def test_beam_width_one_is_greedy() -> None:
    for seed in range(5):
        a = get_searcher("beam", beam_width=1).search(n_layers=10, budget=4, score=Quadratic(10, seed), seed=0)
        b = get_searcher("greedy").search(n_layers=10, budget=4, score=Quadratic(10, seed), seed=0)
        assert (a.removed, a.loss, a.evaluations, a.trace) == (b.removed, b.loss, b.evaluations, b.trace)


def test_beam_avoids_a_trap_that_catches_oneshot() -> None:
    # Singles: 0 and 1 are the best, but removing both is catastrophic; greedy/beam avoid it.
    def f(s: frozenset[int]) -> float:
        return sum((1, 2, 5, 6, 7, 8)[i] for i in s) + (100 if {0, 1} <= s else 0)

    one = get_searcher("oneshot").search(n_layers=6, budget=2, score=f)
    beam = get_searcher("beam").search(n_layers=6, budget=2, score=f)
    assert one.removed == (0, 1) and one.loss == 103
    assert beam.removed == (0, 2) and beam.loss == 6
    assert beam.evaluations == 6 + (15 - 1)  # 6 singles + every pair but {4, 5} (deduped)


# ---------------------------------------------------------------------------------------
# ga / bo: budgets and seeds
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "limit"), [("ga", 50), ("ga", 7), ("bo", 20), ("bo", 3)])
def test_max_evaluations_is_used_exactly(name: str, limit: int) -> None:
    f = Quadratic(10, seed=4)
    r = fast(name, max_evaluations=limit).search(n_layers=10, budget=4, score=f, seed=1)
    assert r.evaluations == limit == len(f.calls) and r.exhausted
    assert r.loss == min(rank_key(loss) for s, loss in r.trace if len(s) == 4)


@pytest.mark.parametrize("name", ["beam", "cbo", "fbs", "greedy", "exhaustive"])
def test_optional_max_evaluations_is_respected(name: str) -> None:
    f = Quadratic(10, seed=4)
    r = get_searcher(name, max_evaluations=25).search(n_layers=10, budget=2, score=f, seed=1)
    assert r.evaluations <= 25 and len(f.calls) == r.evaluations and len(r.removed) == 2


def test_ga_and_bo_defaults_are_the_designed_budgets() -> None:
    assert get_searcher("ga").max_evaluations == 400
    assert get_searcher("bo").max_evaluations == 100


@pytest.mark.parametrize("name", ["ga", "bo"])
def test_same_seed_same_result_and_seeds_matter(name: str) -> None:
    def run(seed: int):  # noqa: ANN202
        return fast(name, max_evaluations=25).search(n_layers=12, budget=4, score=Quadratic(12, seed=7), seed=seed)

    a, b = run(0), run(0)
    assert (a.removed, a.loss, a.trace, a.info) == (b.removed, b.loss, b.trace, b.info)
    others = [run(seed).trace for seed in (1, 2, 3)]
    assert any(t != a.trace for t in others), f"{name}: seeds 0-3 gave identical traces"


def test_ga_uses_the_shared_prior_and_falls_back_to_uniform_when_unaffordable() -> None:
    f = Quadratic(10, seed=4)
    prior = [f(frozenset([i])) for i in range(10)]
    shared = Quadratic(10, seed=4)
    r = get_searcher("ga", max_evaluations=30).search(n_layers=10, budget=3, score=shared, prior=prior)
    assert r.info["prior"] == "shared" and all(len(s) == 3 for s in shared.calls)
    r = get_searcher("ga", max_evaluations=12).search(n_layers=10, budget=3, score=Quadratic(10, seed=4))
    assert r.info["prior"].startswith("uniform") and r.evaluations == 12


def _bo_pool(trace: list[tuple[frozenset[int], float]], n: int, m: int, n_best: int) -> set[frozenset[int]]:
    """BO's candidate pool with ``n_prior_samples=0`` (bo.py): every not yet scored
    swap-neighbour of the ``n_best`` best full sets of ``trace``."""
    observed = [(s, loss) for s, loss in trace if len(s) == m]
    seen = {s for s, _ in observed}
    pool: set[frozenset[int]] = set()
    for s, _ in sorted(observed, key=lambda sl: set_key(*sl))[:n_best]:
        for out in s:
            for into in range(n):
                if into not in s and (s - {out}) | {into} not in seen:
                    pool.add((s - {out}) | {into})
    return pool


def test_bo_acquisition_picks_better_than_a_random_pick_from_its_pool() -> None:
    """The GP + LogEI choose, among BO's own candidate pool, sets that are truly good.

    With ``n_prior_samples=0`` and a uniform prior, the pool at each iteration is known
    exactly (the unscored swap-neighbours of the 3 best sets so far) and the prior term
    of the acquisition is constant, so the only thing choosing the pick is the GP's
    acquisition. For each pick after the initial design we compute its mid-rank
    percentile among the pool's true losses (0 = the pool's best, 1 = its worst). If the
    acquisition were replaced by a uniform random choice from the pool (or were
    uninformative, e.g. a GP that fails to fit), each percentile would be ~uniform on
    [0, 1], P(percentile < 0.5) <= 1/2 at every step: a one-sided binomial test on the
    number of steps below 0.5 (alpha = 0.001) and the mean percentile (< 0.4) catch it.
    A pick that is not in the reconstructed pool means bo.py's pool changed and this
    test must be updated with it.
    """
    pytest.importorskip("botorch")
    from scipy.stats import binomtest

    n, m, init, evals = 12, 3, 10, 30
    percentiles: list[float] = []
    for seed in range(4):
        r = get_searcher(
            "bo", max_evaluations=evals, initial_design=init, n_prior_samples=0, n_best=3, fit_maxiter=20
        ).search(n_layers=n, budget=m, score=Quadratic(n, seed=100 + seed), seed=seed, prior=[0.0] * n)
        assert r.info["prior"] == "shared" and r.info["iterations"] == evals - init == len(r.trace) - init
        f = Quadratic(n, seed=100 + seed)
        for t in range(init, len(r.trace)):
            pick, loss = r.trace[t]
            pool = _bo_pool(r.trace[:t], n, m, n_best=3)
            assert pick in pool, f"seed {seed}, step {t}: BO picked {sorted(pick)} outside its documented pool"
            others = [f(s) for s in pool if s != pick]
            better, ties = sum(v < loss for v in others), sum(v == loss for v in others)
            percentiles.append((better + 0.5 * ties) / len(others))
    below = sum(p < 0.5 for p in percentiles)
    p_value = binomtest(below, len(percentiles), 0.5, alternative="greater").pvalue
    mean = sum(percentiles) / len(percentiles)
    assert p_value < 1e-3 and mean < 0.4, (below, len(percentiles), p_value, mean)


def test_bo_leaves_torch_global_state_alone() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    threads = torch.get_num_threads()
    fast("bo", max_evaluations=15).search(n_layers=8, budget=2, score=Quadratic(8, 0), seed=0)
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads


# ---------------------------------------------------------------------------------------
# cbo
# ---------------------------------------------------------------------------------------
def test_cbo_exact_quadratic_from_pairs_with_few_evaluations() -> None:
    f = Quadratic(10, seed=9, integer=True)
    best_set, best = optimum(f, 10, 4)
    f.calls.clear()
    r = get_searcher("cbo", pair_top=None).search(n_layers=10, budget=4, score=f)
    assert r.removed == best_set and r.loss == best
    assert r.evaluations == 1 + 10 + 45 + 8 < math.comb(10, 4)
    assert r.info["energy_source"] == "pairs" and r.info["solver"] == "enumeration"


def test_cbo_uses_score_energy_when_offered() -> None:
    f = QuadraticWithEnergy(10, seed=9, integer=True)
    best_set, best = optimum(f, 10, 4)
    f.calls.clear()
    r = get_searcher("cbo", top_k=3).search(n_layers=10, budget=4, score=f)
    assert r.removed == best_set and r.loss == best and r.evaluations == 3
    assert r.info["energy_source"] == "score" and r.params["energy_source"] == "auto"
    r = get_searcher("cbo", energy_source="pairs").search(n_layers=10, budget=4, score=f)
    assert r.info["energy_source"] == "pairs" and r.evaluations > 3


def test_cbo_energy_source_score_requires_an_energy() -> None:
    with pytest.raises(ValueError, match="energy"):
        get_searcher("cbo", energy_source="score").search(n_layers=6, budget=2, score=Quadratic(6, 0))


def test_cbo_rejects_a_malformed_energy() -> None:
    f = QuadraticWithEnergy(6, seed=0)
    f.energy = lambda: ([0.0] * 5, [[0.0] * 6] * 6)  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="length 6"):
        get_searcher("cbo").search(n_layers=6, budget=2, score=f)


def test_cbo_milp_matches_enumeration_and_brute_force() -> None:
    f = Quadratic(16, seed=21, integer=True)
    best_set, best = optimum(f, 16, 5)
    enum = get_searcher("cbo", pair_top=None).search(n_layers=16, budget=5, score=Quadratic(16, 21, integer=True))
    milp = get_searcher("cbo", pair_top=None, enumerate_limit=0).search(
        n_layers=16, budget=5, score=Quadratic(16, 21, integer=True), protected={3}
    )
    assert enum.removed == best_set and enum.loss == best and enum.info["solver"] == "enumeration"
    assert milp.info["solver"] == "milp"
    assert (milp.removed, milp.loss) == optimum(f, 16, 5, protected={3})
    # The K lowest energies are the same K sets either way.
    a = get_searcher("cbo", pair_top=None).search(n_layers=16, budget=5, score=Quadratic(16, 21, integer=True))
    b = get_searcher("cbo", pair_top=None, enumerate_limit=0).search(n_layers=16, budget=5, score=Quadratic(16, 21, integer=True))
    assert {s for s, _ in a.trace[-8:]} == {s for s, _ in b.trace[-8:]}


def test_cbo_pair_top_bounds_the_fitting_cost() -> None:
    f = Quadratic(14, seed=2)
    r = get_searcher("cbo", pair_top=5, top_k=4).search(n_layers=14, budget=3, score=f)
    assert r.evaluations <= 1 + 14 + math.comb(5, 2) + 4
    pairs = [s for s in f.calls if len(s) == 2]
    assert len(pairs) == 10 and len(set().union(*pairs)) == 5


# ---------------------------------------------------------------------------------------
# fbs
# ---------------------------------------------------------------------------------------
def test_fbs_prefers_contiguous_segments_when_the_objective_rewards_them() -> None:
    # Singles favour the scattered layers {0, 3, 9, 11}; removing neighbours together is
    # cheaper than the sum of the parts, which makes the block 5..7 the optimum.
    single = [2, 6, 6, 2, 6, 3, 3, 3, 6, 2, 6, 2]

    def f(s: frozenset[int]) -> float:
        x = sorted(s)
        adjacent = sum(1 for a, b in zip(x, x[1:]) if b == a + 1)
        return 10.0 + sum(single[i] for i in x) - 2.5 * adjacent

    best_set, best = optimum(f, 12, 3)
    r = get_searcher("fbs").search(n_layers=12, budget=3, score=f)
    one = get_searcher("oneshot").search(n_layers=12, budget=3, score=f)
    greedy = get_searcher("greedy").search(n_layers=12, budget=3, score=f)
    assert best_set == (5, 6, 7)
    assert r.removed == (5, 6, 7) and r.loss == best
    assert one.loss > best and greedy.loss > best  # both are led astray by the singles


def test_fbs_is_cheap_on_a_deep_model() -> None:
    f = Quadratic(32, seed=1, scale_j=0.5)
    r = get_searcher("fbs").search(n_layers=32, budget=8, score=f)
    g = get_searcher("greedy").search(n_layers=32, budget=8, score=Quadratic(32, seed=1, scale_j=0.5))
    assert r.evaluations < g.evaluations / 2
    assert r.evaluations <= get_searcher("fbs").expected_evaluations(32, 8, 0)


# ---------------------------------------------------------------------------------------
# base.py behaviour that the new searchers rely on
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_budget_zero_is_the_empty_set_scored_once(name: str) -> None:
    f = Quadratic(5, 0)
    r = get_searcher(name).search(n_layers=5, budget=0, score=f)
    assert r.removed == () and r.evaluations == 1 and f.calls == [frozenset()]


def test_minus_infinity_ranks_as_the_worst_loss() -> None:
    assert rank_key(-math.inf) == rank_key(math.nan) == math.inf
    r = get_searcher("exhaustive").search(n_layers=4, budget=1, score=lambda s: -math.inf if 0 in s else 1.0)
    assert r.removed == (1,)


def test_progress_bar_does_not_change_results(capsys) -> None:  # noqa: ANN001
    a = get_searcher("beam", progress="beam").search(n_layers=8, budget=3, score=Quadratic(8, 3))
    b = get_searcher("beam").search(n_layers=8, budget=3, score=Quadratic(8, 3))
    assert (a.removed, a.trace) == (b.removed, b.trace) and a.params == b.params


def _poor_searcher():  # noqa: ANN202
    """A deliberately poor searcher: scores two sets, answers the first (non-finite) one."""
    from dataclasses import dataclass
    from typing import ClassVar

    from depthprune.search.base import Searcher

    @dataclass
    class Poor(Searcher):
        name: ClassVar[str] = "poor"

        def run(self, ctx):  # noqa: ANN001, ANN202
            ctx.score_many([{0, 1}, {2, 3}])
            return {0, 1}

    return Poor()


def test_a_non_finite_answer_is_replaced_by_a_finite_scored_set() -> None:
    r = _poor_searcher().search(n_layers=5, budget=2, score=lambda s: math.nan if 0 in s else float(sum(s)))
    assert r.removed == (2, 3) and r.loss == 5.0


def test_score_many_must_return_one_loss_per_set() -> None:
    class Bad:
        def __call__(self, s):  # noqa: ANN001, ANN204
            return 0.0

        def many(self, sets):  # noqa: ANN001, ANN202
            return [0.0]

    with pytest.raises(RuntimeError, match="score.many returned 1 losses for"):
        get_searcher("greedy").search(n_layers=4, budget=1, score=Bad())


# ---------------------------------------------------------------------------------------
# controls: Block Influence, random sets, the uniform-prior ablation
# ---------------------------------------------------------------------------------------
def test_bi_removes_the_lowest_influence_and_scores_only_its_answer() -> None:
    class WithInfluence:
        def __init__(self) -> None:
            self.calls: list[frozenset[int]] = []

        def __call__(self, s: frozenset[int]) -> float:
            self.calls.append(s)
            return float(sum(s))

        def block_influence(self, metric: str) -> list[float]:
            return [0.5, 0.1, 0.9, 0.05, 0.3, math.nan]

    score = WithInfluence()
    r = get_searcher("bi").search(n_layers=6, budget=2, score=score, seed=0, protected={3})
    assert r.removed == (1, 4) and score.calls == [frozenset({1, 4})] and r.evaluations == 1
    assert r.info["block_influence"][5] is None


def test_bi_refuses_a_plain_loss_callable_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="block_influence"):
        get_searcher("bi").search(n_layers=6, budget=2, score=lambda s: 0.0)
    with pytest.raises(ValueError, match="metric"):
        get_searcher("bi", metric="euclid")


def test_random_scores_distinct_sets_and_seeds_matter() -> None:
    f = Quadratic(10, seed=3)
    a = get_searcher("random", n_sets=12).search(n_layers=10, budget=3, score=f, seed=0)
    b = get_searcher("random", n_sets=12).search(n_layers=10, budget=3, score=Quadratic(10, seed=3), seed=1)
    sets = [s for s, _ in a.trace]
    assert len(sets) == len(set(sets)) == 12 and all(len(s) == 3 for s in sets)
    assert a.loss == min(loss for _, loss in a.trace)
    assert sets != [s for s, _ in b.trace]
    assert get_searcher("random", n_sets=500).search(n_layers=5, budget=2, score=Quadratic(5, 0)).evaluations == 10


@pytest.mark.parametrize("name", ["ga", "bo"])
def test_uniform_prior_neither_asks_for_nor_uses_the_single_removal_losses(name: str) -> None:
    f = Quadratic(9, seed=1)
    prior = [f(frozenset([i])) for i in range(9)]
    r = fast(name, prior="uniform").search(n_layers=9, budget=3, score=Quadratic(9, seed=1), seed=0, prior=prior)
    assert not r.info["used_given_prior"] and r.info["prior"].startswith("uniform")
    shared = fast(name).search(n_layers=9, budget=3, score=Quadratic(9, seed=1), seed=0, prior=prior)
    assert shared.info["used_given_prior"] and [s for s, _ in shared.trace] != [s for s, _ in r.trace]
    with pytest.raises(ValueError, match="prior"):
        get_searcher(name, prior="peaked")


def test_rank_on_a_sample_returns_the_quantile_of_one_seeded_sample() -> None:
    """At 30 blocks the M-sets cannot be enumerated: rank's panel ranks one seeded random sample."""
    from depthprune.search.rank import sample_sets

    f = Quadratic(12, seed=5)
    sample = sample_sets(range(12), 4, 60, seed=7)
    assert len(set(sample)) == 60 and all(len(s) == 4 for s in sample)
    order = sorted(sample, key=lambda s: (rank_key(f(s)), sorted(s)))
    for q in (0.0, 0.5, 1.0):
        r = get_searcher("rank", q=q, sample=60, sample_seed=7).search(n_layers=12, budget=4, score=f, seed=q * 10)
        assert frozenset(r.removed) == order[round(q * 59)]  # the search seed does not move the sample
        assert r.evaluations == 60  # the sample only: rank needs no single-removal prior
    assert get_searcher("rank", sample=60).expected_evaluations(12, 4, 0) == 60
    assert len(sample_sets(range(6), 3, 60, seed=0)) == 20  # fewer M-sets than asked: all of them
