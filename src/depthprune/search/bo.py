"""Prior-guided Bayesian optimisation (πBO) on the binary removal vector, with BoTorch.

Definition (DESIGN.md, searcher table; details the table leaves open are ours and are
parameters below):

* surrogate: BoTorch ``SingleTaskGP`` (its default kernel, likelihood and
  ``Standardize`` outcome transform) on x ∈ {0,1}^L, x_i = 1 iff layer i is removed,
  fitted to y = −f (BoTorch maximises) with ``fit_gpytorch_mll``. nan/inf losses are
  modelled as (worst finite loss + its spread): bad, but finite for the GP.
* initial design: ``initial_design`` distinct M-subsets sampled with
  P(i) ∝ softmax(−prior_i/τ), the prior being p_i = f({i}) (``ctx.prior()``); scored as
  one batch.
* acquisition: ``LogExpectedImprovement`` weighted by the prior as in πBO (Hvarfner et
  al. 2022) via ``PriorGuidedAcquisitionFunction(log=True)``:
  log α(x) + (β/n)·log π(x), n the BO iteration (1, 2, ...), β = ``prior_strength``,
  log π(x) = Σ_i x_i log w_i with w the same softmax weights (a product prior over the
  removed layers; a layer with nan/inf single loss gets log w = −``log_prior_floor``).
* maximised by direct evaluation over a discrete pool of feasible, not yet scored
  M-subsets: every swap-neighbour (one removed layer exchanged for one kept layer) of
  the ``n_best`` best sets so far, plus ``n_prior_samples`` prior samples. The
  ``batch_size`` highest-acquisition candidates (ties: sorted-set order) are scored per
  iteration (q=1 is πBO; larger q picks the top-q of the same acquisition).

Stops at ``max_evaluations`` (respected exactly), when the pool is empty (every
reachable M-set scored), or after ``max_iterations``. Deterministic for a seed: the
torch RNG is seeded from ``ctx.rng`` inside ``torch.random.fork_rng()``, computations
are in float64, and the pool is in sorted order. BoTorch is an optional dependency
(``pip install depthprune[bo]``); it is imported when the search runs.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

from depthprune.common.params import check_ints
from depthprune.search.base import (
    Bounds,
    EvaluationBudgetExhausted,
    Planned,
    SearchContext,
    Searcher,
    rank_key,
    register,
    set_key,
)
from depthprune.search.ga import PRIORS, prior_weights, usable_prior, weighted_sample


@contextlib.contextmanager
def _torch_threads(torch, n: int):  # noqa: ANN001, ANN202
    """Run a block with ``n`` intra-op torch threads, restoring the previous count.

    The GP has at most a few hundred points; on busy cores, thread hand-offs cost far
    more than they save (measured: ~200x slower per autograd step with 2 threads on 2
    shared cores). Only the GP fit and the acquisition run inside; ``score`` never does.
    """
    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


@register
@dataclass
class BayesOptSearcher(Searcher):
    """Prior-guided BO (πBO) with a BoTorch GP over removal vectors.

    Attributes:
        max_evaluations: evaluation budget; default 100, DESIGN.md's table ("e.g. 100").
        initial_design: prior-sampled sets scored before the first GP fit; 10 (ours; the
            usual ~10 initial points of BO).
        prior_strength: β of πBO, the prior's exponent is β/n at iteration n; 10.0 (ours:
            β = N/10 for the default budget N = 100, the scale we recall πBO (Hvarfner
            et al. 2022) using; not checked against that paper here).
        temperature: τ of the prior softmax; None = std of the finite prior values (ours,
            as in ``ga``).
        n_best: best sets whose swap-neighbours enter the candidate pool; 3 (ours).
        n_prior_samples: prior samples added to the pool per iteration; 128 (ours).
        batch_size: sets scored per iteration (top-q of the acquisition); 1 (πBO).
        log_prior_floor: −log w for a layer with nan/inf single loss; 30.0 (ours: about
            e^-30, excludes it without -inf arithmetic).
        max_iterations: hard cap on BO iterations (guards max_evaluations=None); 500.
        fit_maxiter: L-BFGS iterations per GP fit (None = scipy's default, 15000); 100
            (ours: each fit is warm-started from the previous one's hyper-parameters;
            measured, unbounded fits take 150-500 function evaluations on noise-free
            losses, ~0.3-1 s each on a busy CPU).
        prior: "single" (the single-removal losses f({i}), shared) or "uniform" (the
            prior-ablation control: every layer equally likely, f({i}) not asked for).
    """

    name: ClassVar[str] = "bo"
    order: ClassVar[int] = 4  # position in report tables
    stochastic: ClassVar[bool] = True
    batch_decides: ClassVar[bool] = False  # its batches are chunks, not choices (Searcher)
    planned: ClassVar[Planned] = "bound"  # a GP fit per evaluation: too dear for the planner to simulate
    # refitting on a run's recorded losses: capped to AVX2 it asked for the same 60 sets, on AVX-512 for another
    # set at evaluation 25 (tiny-llama3.1 margin M5, Intel, 2026-12-06; docs/measurements.md)
    not_recountable: ClassVar[str] = "a GP fit per step (bounds only)"
    kernel_sensitive: ClassVar[str] = "its GP fits, whose optimum follows the machine's float64 kernels"
    max_evaluations: int | None = 100
    initial_design: int = 10
    prior_strength: float = 10.0
    temperature: float | None = None
    n_best: int = 3
    n_prior_samples: int = 128
    batch_size: int = 1
    log_prior_floor: float = 30.0
    max_iterations: int = 500
    fit_maxiter: int | None = 100
    prior: str = "single"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.prior not in PRIORS:
            raise ValueError(f"bo: prior must be one of {PRIORS}, got {self.prior!r}")
        check_ints("bo", self, {"initial_design": 1, "n_best": 1, "n_prior_samples": 0, "batch_size": 1,
                                "max_iterations": 0, "fit_maxiter": 1}, optional=("fit_maxiter",))
        if not self.prior_strength >= 0:
            raise ValueError(f"bo: prior_strength must be >= 0, got {self.prior_strength!r}")
        if self.temperature is not None and not self.temperature > 0:
            raise ValueError(f"bo: temperature must be > 0 or None, got {self.temperature!r}")
        if not self.log_prior_floor > 0:
            raise ValueError(f"bo: log_prior_floor must be > 0, got {self.log_prior_floor!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """The charged prior, then the initial design .. the evaluation limit."""
        space = math.comb(n_layers, budget)
        limit = space if self.max_evaluations is None else min(space, self.max_evaluations)
        return Bounds(n_layers + min(self.initial_design, space), n_layers + limit, {1: n_layers, budget: limit})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int | None:
        n = n_layers - n_protected
        bound = (n if budget > 1 else 0) + math.comb(n, budget)
        return bound if self.max_evaluations is None else min(bound, self.max_evaluations)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        try:
            import torch
        except ModuleNotFoundError as err:  # pragma: no cover - torch is a core dependency
            raise RuntimeError("bo needs torch") from err
        try:
            import botorch  # noqa: F401
        except ModuleNotFoundError as err:  # pragma: no cover - depends on the install
            raise RuntimeError("the bo searcher needs BoTorch: pip install 'depthprune[bo]'") from err

        m = ctx.budget
        if m == 0:
            return frozenset()
        torch_seed = ctx.rng.randrange(2**62)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed)
            self._run(ctx, torch)
        best = ctx.best()
        assert best is not None
        return best[0]

    # -- the algorithm -------------------------------------------------------------------
    def _run(self, ctx: SearchContext, torch) -> None:  # noqa: ANN001 - torch module
        from botorch.acquisition import LogExpectedImprovement
        from botorch.acquisition.prior_guided import PriorGuidedAcquisitionFunction
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from gpytorch.mlls import ExactMarginalLogLikelihood

        m, cands, rng, n = ctx.budget, ctx.candidates, ctx.rng, ctx.n_layers
        space = math.comb(len(cands), m)
        prior = usable_prior(ctx, reserve=min(self.initial_design, space), kind=self.prior)
        weights = prior_weights(prior, cands, self.temperature)
        log_w = [0.0] * n
        for i, w in zip(cands, weights):
            log_w[i] = math.log(w) if w > 0 else -self.log_prior_floor
        log_w_t = torch.tensor(log_w, dtype=torch.double)

        class LogPrior(torch.nn.Module):
            """log π(x) = Σ_i x_i log w_i (batch x q x L -> batch x q)."""

            def forward(self, X):  # noqa: ANN001, N803
                return X @ log_w_t

        def sample(k: int, exclude: set[frozenset[int]]) -> list[frozenset[int]]:
            out: list[frozenset[int]] = []
            for _ in range(4 * k):
                if len(out) >= k:
                    break
                s = frozenset(weighted_sample(rng, cands, weights, m))
                if s not in exclude and s not in out:
                    out.append(s)
            return out

        def to_x(sets: list[frozenset[int]]):  # noqa: ANN202
            x = torch.zeros(len(sets), n, dtype=torch.double)
            for r, s in enumerate(sets):
                x[r, sorted(s)] = 1.0
            return x

        def full_sets() -> list[tuple[frozenset[int], float]]:
            return [(s, loss) for s, loss in ctx.trace if len(s) == m]

        # Initial design (one batch).
        init = sample(min(self.initial_design, space), set())
        ctx.score_many(sorted(init, key=lambda s: tuple(sorted(s))))

        ctx.info["iterations"] = 0
        fits: list[dict[str, object]] = ctx.info.setdefault("gp_fits", [])
        warm = None
        for it in range(1, self.max_iterations + 1):
            if ctx.remaining == 0:
                raise EvaluationBudgetExhausted  # before paying for a GP fit
            observed = full_sets()
            if len(observed) >= space:
                break
            seen = {s for s, _ in observed}
            ranked = sorted(observed, key=lambda sl: set_key(*sl))
            pool_set: set[frozenset[int]] = set()
            for s, _loss in ranked[: self.n_best]:
                kept = [i for i in cands if i not in s]
                for out in sorted(s):
                    for into in kept:
                        nb = (s - {out}) | {into}
                        if nb not in seen:
                            pool_set.add(nb)
            pool_set.update(sample(self.n_prior_samples, seen))
            if not pool_set:
                # Neighbours and samples all scored: fall back to any unscored M-set.
                pool_set.update(self._first_unseen(cands, m, seen, 64))
            if not pool_set:
                break
            pool = sorted(pool_set, key=lambda s: tuple(sorted(s)))

            losses = [rank_key(loss) for _, loss in observed]
            finite = [v for v in losses if math.isfinite(v)]
            if finite:
                worst, spread = max(finite), (max(finite) - min(finite)) or 1.0
                y = [v if math.isfinite(v) else worst + spread for v in losses]
                train_x = to_x([s for s, _ in observed])
                train_y = -torch.tensor(y, dtype=torch.double).unsqueeze(-1)
                with warnings.catch_warnings(), _torch_threads(torch, 1):
                    warnings.simplefilter("ignore")
                    gp = SingleTaskGP(train_x, train_y)
                    recorded = ctx.recorded_gp(len(fits)) if ctx.recorded_gp is not None else None
                    if recorded is not None:  # a replay: this fit's recorded optimum, not a new fit
                        gp.load_state_dict({k: torch.tensor(v, dtype=torch.double) for k, v in recorded.items()},
                                           strict=False)
                    else:
                        if warm is not None:  # start from the previous fit's hyper-parameters
                            gp.covar_module.load_state_dict(warm[0])
                            gp.likelihood.load_state_dict(warm[1])
                        fit_gpytorch_mll(
                            ExactMarginalLogLikelihood(gp.likelihood, gp),
                            optimizer_kwargs=None if self.fit_maxiter is None else {"options": {"maxiter": self.fit_maxiter}},
                        )
                    warm = (gp.covar_module.state_dict(), gp.likelihood.state_dict())
                    # the fit's optimum, which is this machine's numerics (float64 L-BFGS): recorded, so
                    # that a result replays without refitting (depthprune.verify.replay)
                    fits.append({name: p.detach().tolist() for name, p in gp.named_parameters()})
                    acq = PriorGuidedAcquisitionFunction(
                        LogExpectedImprovement(gp, best_f=train_y.max()),
                        LogPrior(),
                        log=True,
                        prior_exponent=self.prior_strength / it,
                    )
                    with torch.no_grad():
                        values = acq(to_x(pool).unsqueeze(1)).tolist()
            else:
                # Nothing finite to model: follow the prior alone.
                with torch.no_grad():
                    values = (to_x(pool) @ log_w_t).tolist()
            order = sorted(
                range(len(pool)),
                key=lambda r: (-values[r] if math.isfinite(values[r]) else math.inf, tuple(sorted(pool[r]))),
            )
            picks = [pool[r] for r in order[: self.batch_size]]
            ctx.info["iterations"] = it
            ctx.score_many(picks)

    @staticmethod
    def _first_unseen(cands: tuple[int, ...], m: int, seen: set[frozenset[int]], k: int) -> list[frozenset[int]]:
        import itertools

        out: list[frozenset[int]] = []
        for c in itertools.combinations(cands, m):
            s = frozenset(c)
            if s not in seen:
                out.append(s)
                if len(out) >= k:
                    break
        return out
