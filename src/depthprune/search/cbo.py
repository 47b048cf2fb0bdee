"""Constrained binary optimisation of a quadratic removal energy (after Jansen et al. 2026).

Definition (DESIGN.md, searcher table; arXiv 2602.00161):

* energy: E(x) = h·x + xᵀJx on the removal vector x ∈ {0,1}^L (J symmetric, zero
  diagonal; a diagonal would be folded into h since x_i² = x_i). Where it comes from,
  ``energy_source``:

  - ``"score"``: ``score.energy() -> (h, J)``, offered by the scoring engine as an
    optional attribute of the score callable (e.g. fitted from gradients w.r.t.
    per-block gates). The searcher still sees no model.
  - ``"pairs"``: fitted model-free from removals, every one an evaluation (the singles
    are the shared prior, free when it is given): h_i = f({i}) − f(∅) and, for pairs {i, j}, the residual
    r_ij = f({i,j}) − f({i}) − f({j}) + f(∅), J_ij = J_ji = r_ij / 2, so that
    f(∅) + E(x) reproduces f exactly on every set of size ≤ 2 it was fitted on. Pairs
    are restricted to the ``pair_top`` layers with the lowest f({i}) (J = 0 elsewhere);
    none are needed when M ≤ 1.
  - ``"auto"`` (default): ``"score"`` when the callable has ``energy``, else ``"pairs"``.

  Which source was used is recorded in ``SearchResult.info["energy_source"]``.
* solve min E(x) s.t. Σx = M, x_i = 0 for protected layers, exactly: by enumeration
  when C(L', M) ≤ ``enumerate_limit``, otherwise with ``scipy.optimize.milp`` on the
  standard linearisation (y_ij ≥ x_i + x_j − 1, y_ij ≤ x_i, y_ij ≤ x_j), the k-th
  solution found after adding no-good cuts Σ_{i∈S_1..k−1} x_i ≤ M − 1.
* the ``top_k`` lowest-energy configurations are re-scored with f (one batch) and the
  best set (by f, not by E) is kept; the energy is only a model, verified with f. Any
  M-set already scored while fitting (M ≤ 2) competes too.

Non-finite fitted values (a removal whose loss is nan/inf) become a large finite penalty
in the energy, so such layers/pairs are avoided but the solver stays numerically sane.
Cost: "score" -> top_k evaluations; "pairs" -> 1 + L' + C(min(L', pair_top), 2) + top_k.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from depthprune.search.base import Bounds, SearchContext, Searcher, rank_key, register, set_key

ENERGY_SOURCES = ("auto", "score", "pairs")


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values.tolist()]


@register
@dataclass
class CBOSearcher(Searcher):
    """Quadratic-energy constrained binary optimisation, re-scored with f.

    Attributes:
        top_k: K, the lowest-energy configurations re-scored with f; 8 (ours; the paper
            re-scores "the K lowest", K unstated).
        energy_source: "auto" | "score" | "pairs" (see the module docstring); "auto".
        pair_top: fit pair terms only among this many layers with the lowest single
            loss (None = all removable layers, C(L', 2) pair evaluations); 16 (ours:
            120 pairs whatever L, enough to cover the 2M best singles for M ≤ 8).
        enumerate_limit: largest C(L', M) solved by enumeration instead of MILP;
            200000 (ours: a fraction of a second of numpy).
        penalty_scale: nan/inf fitted terms become penalty_scale × (1 + max ``|finite
            term|``); 1000.0 (ours).
    """

    name: ClassVar[str] = "cbo"
    not_recountable: ClassVar[str] = "energy from gate gradients, not recorded"
    order: ClassVar[int] = 5  # position in report tables
    top_k: int = 8
    energy_source: str = "auto"
    pair_top: int | None = 16
    enumerate_limit: int = 200_000
    penalty_scale: float = 1000.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.energy_source not in ENERGY_SOURCES:
            raise ValueError(f"cbo: energy_source must be one of {ENERGY_SOURCES}, got {self.energy_source!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"cbo: top_k must be a positive integer, got {self.top_k!r}")
        if self.pair_top is not None and (
            isinstance(self.pair_top, bool) or not isinstance(self.pair_top, int) or self.pair_top < 0
        ):
            raise ValueError(f"cbo: pair_top must be a non-negative integer or None, got {self.pair_top!r}")
        if isinstance(self.enumerate_limit, bool) or not isinstance(self.enumerate_limit, int) or self.enumerate_limit < 0:
            raise ValueError(f"cbo: enumerate_limit must be a non-negative integer, got {self.enumerate_limit!r}")
        if not self.penalty_scale > 0:
            raise ValueError(f"cbo: penalty_scale must be > 0, got {self.penalty_scale!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """With the grid's energy (``auto``/``score``: the Scorer offers it): dense + singles, then the top
        ``top_k``; from scores alone: dense, singles and pairs (of the ``pair_top`` best singles), then top_k."""
        n, m = n_layers, budget
        space = math.comb(n, m)
        top_k = min(self.top_k, space)
        if self.energy_source in ("auto", "score"):
            sizes = {0: 1, 1: n, m: top_k}
            return Bounds(sum(sizes.values()), sum(sizes.values()), sizes, energy=True)
        top = n if self.pair_top is None else min(n, self.pair_top)
        pairs = math.comb(top, 2) if m >= 2 else 0
        sizes = {0: 1, 1: n, 2: pairs + (top_k if m == 2 else 0), **({m: top_k} if m > 2 else {})}
        return Bounds(1 + n + pairs, sum(sizes.values()), sizes)

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        n = n_layers - n_protected
        top = n if self.pair_top is None else min(n, self.pair_top)
        fit = 1 + n + (math.comb(top, 2) if budget >= 2 else 0)
        return fit + min(self.top_k, math.comb(n, budget))

    # -- energy ------------------------------------------------------------------------
    def _energy_from_score(self, ctx: SearchContext, energy) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
        h_raw, j_raw = energy()
        h = np.asarray(h_raw, dtype=float).reshape(-1)
        j = np.asarray(j_raw, dtype=float)
        # what cbo read from the model, as read (None for a non-finite entry, which _sanitise penalises
        # either way), so that a result replays without the model (depthprune.verify.replay)
        ctx.info["energy"] = {"h": _finite_or_none(h), "J": [_finite_or_none(row) for row in j]}
        n = ctx.n_layers
        if h.shape != (n,) or j.shape != (n, n):
            raise ValueError(f"cbo: score.energy() must return h of length {n} and J of shape {n}x{n}, "
                             f"got {h.shape} and {j.shape}")
        j = (j + j.T) / 2.0
        h = h + np.diag(j)
        np.fill_diagonal(j, 0.0)
        return h, j

    def _energy_from_pairs(self, ctx: SearchContext) -> tuple[np.ndarray, np.ndarray]:
        n, cands = ctx.n_layers, ctx.candidates
        h = np.zeros(n)
        j = np.zeros((n, n))
        # Singles are the shared prior (given, or scored here once, counted, in one batch
        # with the empty set).
        if ctx.prior_cost():
            ctx.score_many([frozenset()] + [frozenset([i]) for i in cands])
        prior = ctx.prior()
        singles = [prior[i] for i in cands]
        base = ctx.score(frozenset())
        # Under sum(x) = M a constant offset of all h_i (or of all J_ij) shifts E by a
        # constant, so a non-finite f(empty) can be replaced by 0 without changing the argmin.
        base = rank_key(base) if math.isfinite(rank_key(base)) else 0.0
        for i, fi in zip(cands, singles):
            h[i] = rank_key(fi) - base  # +inf for a nan/inf single removal
        if ctx.budget >= 2:
            ranked = sorted(cands, key=lambda i: (h[i], i))
            top = sorted(ranked if self.pair_top is None else ranked[: self.pair_top])
            pairs = [frozenset(p) for p in itertools.combinations(top, 2)]
            losses = ctx.score_many(pairs)
            for p, fij in zip(pairs, losses):
                a, b = sorted(p)
                if not (math.isfinite(h[a]) and math.isfinite(h[b])):
                    r = 0.0  # already penalised through h; the pair adds nothing known
                elif not math.isfinite(rank_key(fij)):
                    r = math.inf  # fine alone, broken together
                else:
                    r = fij - h[a] - h[b] - base
                j[a, b] = j[b, a] = r / 2.0
        return h, j

    def _sanitise(self, h: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        finite = np.concatenate([h[np.isfinite(h)], j[np.isfinite(j)]])
        penalty = self.penalty_scale * (1.0 + (float(np.max(np.abs(finite))) if finite.size else 0.0))
        # Non-finite terms (nan, ±inf) are the worst: a large finite positive penalty.
        return np.where(np.isfinite(h), h, penalty), np.where(np.isfinite(j), j, penalty)

    # -- solvers ---------------------------------------------------------------------------
    @staticmethod
    def _energy(h: np.ndarray, j: np.ndarray, s: Sequence[int]) -> float:
        idx = list(s)
        return float(h[idx].sum() + j[np.ix_(idx, idx)].sum())

    def _lowest_by_enumeration(self, h, j, cands, m, k) -> list[frozenset[int]]:  # noqa: ANN001
        heap: list[tuple[float, tuple[int, ...]]] = []  # max-heap of the k best via negation
        combos = itertools.combinations(cands, m)
        while chunk := list(itertools.islice(combos, 4096)):
            idx = np.array(chunk, dtype=int).reshape(len(chunk), m)
            e = h[idx].sum(axis=1)
            if m >= 2:
                e = e + j[idx[:, :, None], idx[:, None, :]].sum(axis=(1, 2))
            for c, ec in zip(chunk, e.tolist()):
                item = (-ec, tuple(-x for x in c))  # larger = worse; ties: larger set worse
                if len(heap) < k:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)
        best = sorted(((-ne, tuple(-x for x in nc)) for ne, nc in heap))
        return [frozenset(c) for _, c in best]

    def _lowest_by_milp(self, h, j, cands, m, k) -> list[frozenset[int]]:  # noqa: ANN001
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import lil_matrix

        c_idx = list(cands)
        nc = len(c_idx)
        pairs = [(a, b) for a in range(nc) for b in range(a + 1, nc) if j[c_idx[a], c_idx[b]] != 0.0]
        nv = nc + len(pairs)
        cost = np.zeros(nv)
        cost[:nc] = h[c_idx]
        for p, (a, b) in enumerate(pairs):
            cost[nc + p] = 2.0 * j[c_idx[a], c_idx[b]]
        rows = 1 + 3 * len(pairs)
        a_mat = lil_matrix((rows + k, nv))
        lo = np.full(rows + k, -np.inf)
        hi = np.full(rows + k, np.inf)
        a_mat[0, :nc] = 1.0
        lo[0] = hi[0] = m
        for p, (a, b) in enumerate(pairs):
            r = 1 + 3 * p
            y = nc + p
            a_mat[r, y], a_mat[r, a], a_mat[r, b] = 1.0, -1.0, -1.0  # y >= xa + xb - 1
            lo[r] = -1.0
            a_mat[r + 1, y], a_mat[r + 1, a] = 1.0, -1.0  # y <= xa
            hi[r + 1] = 0.0
            a_mat[r + 2, y], a_mat[r + 2, b] = 1.0, -1.0  # y <= xb
            hi[r + 2] = 0.0
        found: list[frozenset[int]] = []
        for t in range(k):
            used = rows + t
            res = milp(
                cost,
                constraints=LinearConstraint(a_mat[:used].tocsr(), lo[:used], hi[:used]),
                integrality=np.concatenate([np.ones(nc), np.zeros(len(pairs))]),
                bounds=Bounds(0.0, 1.0),
            )
            if res.x is None:
                break
            chosen = [a for a in range(nc) if res.x[a] > 0.5]
            if len(chosen) != m:  # pragma: no cover - solver tolerance trouble
                break
            found.append(frozenset(c_idx[a] for a in chosen))
            for a in chosen:  # no-good cut: not this set again
                a_mat[rows + t, a] = 1.0
            hi[rows + t] = m - 1
        # Order by energy with the usual deterministic tie-break.
        return sorted(found, key=lambda s: (self._energy(h, j, sorted(s)), tuple(sorted(s))))

    # -- search ----------------------------------------------------------------------------
    def run(self, ctx: SearchContext) -> frozenset[int]:
        m, cands = ctx.budget, ctx.candidates
        if m == 0:
            return frozenset()
        energy = ctx.energy  # getattr(score, "energy", None): the searcher sees no model
        source = self.energy_source
        if source == "auto":
            source = "score" if callable(energy) else "pairs"
        if source == "score":
            if not callable(energy):
                raise ValueError("cbo: energy_source='score' but the score callable has no energy() method")
            h, j = self._energy_from_score(ctx, energy)
        else:
            h, j = self._energy_from_pairs(ctx)
        ctx.info["energy_source"] = source
        h, j = self._sanitise(h, j)
        k = min(self.top_k, math.comb(len(cands), m))
        if math.comb(len(cands), m) <= self.enumerate_limit:
            lowest = self._lowest_by_enumeration(h, j, cands, m, k)
            ctx.info["solver"] = "enumeration"
        else:
            lowest = self._lowest_by_milp(h, j, cands, m, k)
            ctx.info["solver"] = "milp"
        losses = ctx.score_many(lowest)
        options = list(zip(lowest, losses))
        options += [(s, loss) for s, loss in ctx.trace if len(s) == m]
        return min(options, key=lambda sl: set_key(*sl))[0]
