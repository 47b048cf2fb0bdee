"""The per-layer prior really steers the prior-guided searchers (ga, bo).

GA draws its initial population, and weights its crossover, with P(i) ∝ softmax(−p_i/τ);
BO draws its initial design and its candidate samples the same way and adds
(β/n)·log π(x) to its acquisition. So, under a tight evaluation budget, the quality of
the prior should show in the answer. On a synthetic objective with a known structure
(``Quadratic``: additive per-layer costs h_i ∈ [0, 10] plus pairwise interactions
J_ij ∈ [−2, 2]; 14 layers, budget 4, so 1001 feasible sets) each searcher runs, for the
same 20 seeds (objective and search seed), with three priors:

* informative: the true single-removal losses f({i});
* uniform: all equal (the prior says nothing);
* misleading: the negated single-removal losses (the ranking reversed).

The paired one-sided Wilcoxon signed-rank test over the 20 seeds must find, at
α = 0.01 each, informative < uniform and uniform < misleading in final loss (and so
informative < misleading). A searcher that ignored its prior would give the same answer
under all three priors for every seed: all pairs tie, p = 1, and the test fails.
"""

from __future__ import annotations

import pytest

from depthprune.search import get_searcher
from tests.search.test_searchers import Quadratic

N_LAYERS, BUDGET, SEEDS, ALPHA = 14, 4, range(20), 0.01

# Tight budgets, so that where the search starts (the prior) decides where it ends.
SETTINGS = {
    "ga": {"max_evaluations": 32},  # the initial population (16) and one generation
    # 4 prior-sampled sets, then 6 GP-guided picks. 60 searches x 6 GP fits; with
    # fit_maxiter=20 this test took 28-42 s on a busy 2-core machine (the default 100 is
    # ~3x slower per fit).
    "bo": {"max_evaluations": 10, "initial_design": 4, "n_prior_samples": 32, "fit_maxiter": 20},
}


def objective(seed: int) -> Quadratic:
    return Quadratic(N_LAYERS, seed=1000 + seed, scale_j=2.0)


def one_sided_p(a: list[float], b: list[float]) -> float:
    """Paired Wilcoxon signed-rank p-value for 'a is lower than b'; 1.0 if every pair ties."""
    from scipy.stats import wilcoxon

    if all(x == y for x, y in zip(a, b)):
        return 1.0
    return float(wilcoxon(a, b, alternative="less").pvalue)


@pytest.mark.parametrize("name", ["ga", "bo"])
def test_an_informative_prior_beats_a_uniform_one_which_beats_a_misleading_one(name: str) -> None:
    """Catches a searcher that ignores ``prior`` (or uses it with the wrong sign)."""
    if name == "bo":
        pytest.importorskip("botorch")  # the optional [bo] extra
    loss: dict[str, list[float]] = {"informative": [], "uniform": [], "misleading": []}
    for seed in SEEDS:
        f = objective(seed)
        singles = [f(frozenset([i])) for i in range(N_LAYERS)]
        priors = {
            "informative": singles,
            "uniform": [0.0] * N_LAYERS,
            "misleading": [-v for v in singles],
        }
        for kind, prior in priors.items():
            r = get_searcher(name, **SETTINGS[name]).search(
                n_layers=N_LAYERS, budget=BUDGET, score=objective(seed), seed=seed, prior=prior
            )
            assert r.info["prior"] == "shared" and r.evaluations == SETTINGS[name]["max_evaluations"]
            loss[kind].append(r.loss)

    def summary(a: str, b: str) -> str:
        wins = sum(x < y for x, y in zip(loss[a], loss[b]))
        ties = sum(x == y for x, y in zip(loss[a], loss[b]))
        return f"{a} < {b}: p={one_sided_p(loss[a], loss[b]):.2g}, {wins} wins, {ties} ties of {len(SEEDS)}"

    pairs = (("informative", "uniform"), ("uniform", "misleading"), ("informative", "misleading"))
    report = "; ".join(summary(a, b) for a, b in pairs)
    assert one_sided_p(loss["informative"], loss["uniform"]) < ALPHA, report
    assert one_sided_p(loss["uniform"], loss["misleading"]) < ALPHA, report
    assert one_sided_p(loss["informative"], loss["misleading"]) < ALPHA, report
