"""Constructed grids whose truth is known, for testing that evaluation noise cannot tilt a verdict.

A grid is 2 models x 2 budgets x 2 objectives x 7 searchers (the smollm2-era construction of the
issue that asked for noise-proof verdicts). Each solution has a true accuracy and a true log
perplexity; what a result stores is their *measurement*: per-item 0/1 outcomes on ``n_items``
items and per-window mean NLLs on ``n_windows`` windows, drawn with a seeded generator. Items of
one grid are the same for every solution, and solutions of one condition may share a part of their
item outcomes (``shared``: the share of items on which a solution's outcome is a condition-wide
draw, as two pruned models of one dense model agree on many items).
"""

from __future__ import annotations

import math

import numpy as np

from depthprune.results.schema import Result
from tests.fixtures import stored_identity

SEARCHERS = ("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")
OBJECTIVES = ("ppl", "margin")
MODELS = ("m-a", "m-b")
BUDGETS = (7, 9)
TASK = "task"


def _bits(x: np.ndarray) -> str:
    return "".join("1" if v else "0" for v in x)


def grid_results(seed: int, *, n_items: int = 32, n_windows: int = 8, shared: float = 0.0,
                 acc_objective: tuple[float, float] = (0.45, 0.35), acc_searcher: float = 0.0,
                 lppl_objective: tuple[float, float] = (3.0, 3.6), lppl_searcher: float = 0.02,
                 window_sd: float = 0.3, rho: tuple[float, float] | None = None,
                 extra_sets: int = 0) -> list[Result]:
    """The results of one constructed grid.

    ``acc_searcher``: spread of a searcher effect on accuracy (true accuracies of one condition's
    searchers spread evenly over ± this, in a seeded order per condition); 0 = the searcher does
    nothing. ``rho``: the true rank relation (ppl objective, margin objective) between −log ppl and
    accuracy across a condition's solutions, made by ordering the searcher effects on accuracy by
    their log perplexities (+1: better ppl ↔ better accuracy; −1 the reverse; None: unrelated).
    ``extra_sets``: further distinct solutions per condition (an alignment panel), search "rank".
    """
    rng = np.random.default_rng(seed)
    out = []
    window_difficulty = rng.normal(0, window_sd, n_windows)  # the same windows for every solution
    set_no = 0
    for model in MODELS:
        for budget in BUDGETS:
            names = list(SEARCHERS) + [f"rank{k}" for k in range(extra_sets)]
            k = len(names)
            searcher_order = rng.permutation(k)  # a searcher's effect is the same under both objectives
            for o, objective in enumerate(OBJECTIVES):
                lppl = lppl_objective[o] + lppl_searcher * np.linspace(-1, 1, k)[rng.permutation(k)]
                effects = acc_searcher * np.linspace(-1, 1, k)  # ascending
                if rho is not None and rho[o] != 0:
                    # the best (lowest) log perplexity gets the largest effect (rho > 0) or the smallest
                    rank = np.argsort(np.argsort(lppl))  # 0 = lowest log ppl
                    acc_eff = effects[::-1][rank] if rho[o] > 0 else effects[rank]
                else:
                    acc_eff = effects[searcher_order]
                p = acc_objective[o] + acc_eff
                common = rng.random(n_items)  # the condition-wide draw
                for j, search in enumerate(names):
                    own = rng.random(n_items)
                    draw = np.where(rng.random(n_items) < shared, common, own)
                    outcomes = draw < p[j]
                    windows = lppl[j] + window_difficulty + rng.normal(0, 0.05, n_windows)
                    set_no += 1
                    ident = stored_identity(grid="noise", model=model, budget=budget, objective=objective,
                                            search=search if j < len(SEARCHERS) else "rank",
                                            variant="default" if j < len(SEARCHERS) else f"q{j}",
                                            calibration_seed=0, search_seed=0)
                    out.append(Result({
                        "identity": ident, "n_layers": 30,
                        "removed": [set_no % 30, (set_no // 30) % 30 + 100, set_no + 1000],
                        "calibration_loss": float(lppl[j]),
                        "metrics": {"avg_acc": float(outcomes.mean()), f"{TASK}_acc_norm": float(outcomes.mean()),
                                    "c4_ppl": float(math.exp(windows.mean()))},
                        "item_outcomes": {TASK: {"acc_norm": _bits(outcomes)}},
                        "window_nll": {"c4": [float(w) for w in windows]},
                        "evaluation_protocol": {"zero_shot": {"headline_metric": {TASK: "acc_norm"}}},
                        "cost": {"layer_forwards": 1, "seconds": 1.0},
                    }))
    return out
