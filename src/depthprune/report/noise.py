"""The evaluation's own noise, from per-item and per-window outcomes, for verdicts it cannot tilt.

An accuracy measured on n items, or a perplexity on n windows, is a sample mean: two solutions
evaluated on the same items differ by their real difference plus the noise of that sample. A
statistic built from several solutions' metrics (a variance share, a Spearman ρ) inherits the
noise, and not symmetrically: noise adds variance to every solution, so a variance share that
"the searcher" explains grows with noise alone, and noise pulls a correlation toward 0. This
module measures the noise from the outcomes a result stores
(:data:`depthprune.results.schema` ``item_outcomes``, ``item_clusters``, ``window_nll``) so that a
verdict can (a) subtract it where it biases a statistic and (b) resample it where it only
blurs one.

* An :class:`Outcomes` block is one task (or one perplexity dataset) seen by several
  solutions on the same units: a [units x solutions] array and each unit's cluster. Units of
  one cluster (the items of one source document, synset, ...) are not independent, so every
  variance here is cluster-robust and every resample draws whole clusters, the same clusters
  for every solution (a paired design: what solutions get right in common cancels).
* :func:`measure` gives the solutions' means (avg accuracy over tasks, mean window NLL = log
  perplexity) and their noise covariance Σ (the cluster-robust sandwich of the means).
* :func:`resample` draws clusters with replacement, for a bootstrap of the evaluation.
* :func:`paired_mde` is the smallest paired difference between two solutions that the
  evaluation detects at the stated power (Miller 2024, "Adding Error Bars to Evals":
  n ≈ (z_{1-α/2} + z_power)² × discordance / MDE²).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Outcomes:
    """Cluster totals of one task's (or dataset's) outcomes for several solutions on the same units.

    Stored as per-cluster sums (``totals`` [clusters x solutions]) and unit counts (``counts``
    [clusters]): everything here (means, cluster-robust covariance, cluster resampling) needs
    only those.
    """

    totals: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_units(cls, values: np.ndarray, clusters: Sequence[int] | None = None) -> Outcomes:
        """``values`` [units x solutions]; ``clusters`` one id per unit (None: every unit its own)."""
        values = np.asarray(values, dtype=float)
        if values.ndim != 2:
            raise ValueError(f"outcomes must be [units x solutions], got shape {values.shape}")
        if clusters is None:
            return cls(values.copy(), np.ones(len(values)))
        ids = np.asarray(clusters)
        if len(ids) != len(values):
            raise ValueError(f"{len(ids)} cluster ids for {len(values)} units")
        _, inverse = np.unique(ids, return_inverse=True)
        totals = np.zeros((inverse.max() + 1, values.shape[1]))
        np.add.at(totals, inverse, values)
        return cls(totals, np.bincount(inverse).astype(float))

    @property
    def n_units(self) -> int:
        return int(self.counts.sum())

    @property
    def n_clusters(self) -> int:
        return len(self.counts)

    def columns(self, index: Sequence[int]) -> Outcomes:
        return Outcomes(self.totals[:, list(index)], self.counts)

    def mean(self) -> np.ndarray:
        return self.totals.sum(0) / self.counts.sum()

    def covariance(self) -> np.ndarray:
        """Cluster-robust covariance of the solutions' means (G/(G−1) small-sample factor)."""
        g = self.n_clusters
        if g < 2:
            return np.full((self.totals.shape[1],) * 2, np.nan)
        resid = self.totals - np.outer(self.counts, self.mean())
        return (g / (g - 1)) * resid.T @ resid / self.counts.sum() ** 2


def measure(blocks: Sequence[Outcomes]) -> tuple[np.ndarray, np.ndarray]:
    """The solutions' means averaged over blocks (tasks weigh equally, as in avg_acc) and the
    noise covariance of those averages (blocks are independent samples)."""
    if not blocks:
        raise ValueError("no outcome blocks")
    means = np.mean([b.mean() for b in blocks], axis=0)
    cov = np.sum([b.covariance() for b in blocks], axis=0) / len(blocks) ** 2
    return means, cov


def resample(blocks: Sequence[Outcomes], rng: np.random.Generator) -> list[Outcomes]:
    """One bootstrap draw: each block's clusters with replacement, the same ones for every solution."""
    out = []
    for b in blocks:
        pick = rng.integers(b.n_clusters, size=b.n_clusters)
        out.append(Outcomes(b.totals[pick], b.counts[pick]))
    return out


#: bootstrap's answers by the bytes of its inputs, read-only: a report asks for the same draws again (each threshold
#: of a claim's sensitivity, each firmness re-judgement, each interval of a result shown twice; the committed
#: archives' report asked 1,698 times for 674 distinct ones); at most BOOTSTRAPS_KEPT, oldest out
_BOOTSTRAPS: dict[tuple[Any, ...], list[tuple[np.ndarray, np.ndarray]]] = {}
BOOTSTRAPS_KEPT = 1024


def bootstrap(blocks: Sequence[Outcomes], n_resamples: int, seed: int,
              groups: Sequence[Sequence[int]] | None = None,
              chunk_cells: int = 4_000_000) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`draw_bootstrap`, computed once per distinct input (the blocks' values, exactly): the same bits."""
    key = (tuple((b.totals.dtype.str, b.totals.shape, b.totals.tobytes(), b.counts.dtype.str, b.counts.tobytes())
                 for b in blocks), int(n_resamples), int(seed),
           None if groups is None else tuple(tuple(int(c) for c in g) for g in groups), int(chunk_cells))
    if key not in _BOOTSTRAPS:
        answer = draw_bootstrap(blocks, n_resamples, seed, groups, chunk_cells)
        for arrays in answer:  # shared from now on: a caller that wrote into one would raise
            for a in arrays:
                a.flags.writeable = False
        if len(_BOOTSTRAPS) >= BOOTSTRAPS_KEPT:
            del _BOOTSTRAPS[next(iter(_BOOTSTRAPS))]
        _BOOTSTRAPS[key] = answer
    return list(_BOOTSTRAPS[key])


def draw_bootstrap(blocks: Sequence[Outcomes], n_resamples: int, seed: int,
                   groups: Sequence[Sequence[int]] | None = None,
                   chunk_cells: int = 4_000_000) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`measure` of ``n_resamples`` draws of :func:`resample`, vectorised, for each group of
    solution columns (``groups``; None: all columns as one): means [draws x group] and noise
    covariances [draws x group x group]. Every group sees the same draws (the same clusters). Seeded.

    Clusters with identical outcomes are interchangeable, so a draw of G clusters with
    replacement is a multinomial count over the distinct ones (0/1 items of solutions that
    mostly agree have few distinct patterns): the means and the cluster-robust covariance are
    sums over distinct clusters weighted by their counts.
    """
    rng = np.random.default_rng(seed)
    n_sol = blocks[0].totals.shape[1]
    groups = [list(range(n_sol))] if groups is None else [list(g) for g in groups]
    out = [(np.zeros((n_resamples, len(g))), np.zeros((n_resamples, len(g), len(g)))) for g in groups]
    for blk in blocks:
        g_clusters = blk.n_clusters
        rows, multiplicity = np.unique(np.column_stack([blk.totals, blk.counts]), axis=0, return_counts=True)
        all_totals, counts = rows[:, :-1], rows[:, -1]
        draws = rng.multinomial(g_clusters, multiplicity / g_clusters, size=n_resamples).astype(float)  # [B, P]
        n = draws @ counts
        q = draws @ counts ** 2
        for cols, (means, covs) in zip(groups, out):
            totals = all_totals[:, cols]
            k = len(cols)
            mean = (draws @ totals) / n[:, None]
            means += mean
            if g_clusters < 2:
                covs += np.nan
                continue
            v = draws @ (counts[:, None] * totals)  # sum_c k_c n_c T_c
            outer_rows = (totals[:, :, None] * totals[:, None, :]).reshape(len(totals), -1)  # T_c T_cᵀ, flattened
            step = max(1, chunk_cells // max(1, k * k))
            for start in range(0, n_resamples, step):
                sl = slice(start, start + step)
                a = (draws[sl] @ outer_rows).reshape(-1, k, k)  # sum_c k_c T_c T_cᵀ: one GEMM
                m, vv = mean[sl], v[sl]
                outer = a - m[:, :, None] * vv[:, None, :] - vv[:, :, None] * m[:, None, :] \
                    + q[sl, None, None] * m[:, :, None] * m[:, None, :]
                covs[sl] += (g_clusters / (g_clusters - 1)) * outer / (n[sl] ** 2)[:, None, None]
    return [(means / len(blocks), covs / len(blocks) ** 2) for means, covs in out]


def z_sum(confidence: float, power: float) -> float:
    """z_{1−α/2} + z_power: an MDE is this many standard errors."""
    return float(stats.norm.ppf(0.5 + confidence / 2) + stats.norm.ppf(power))


def paired_mde(blocks: Sequence[Outcomes], a: int, b: int, confidence: float = 0.95, power: float = 0.80) -> float:
    """The smallest difference of solutions ``a`` and ``b``'s averaged means that the evaluation
    detects at ``power`` with a two-sided test at ``confidence`` (paired, cluster-robust)."""
    _, cov = measure(blocks)
    se = float(np.sqrt(max(cov[a, a] + cov[b, b] - 2 * cov[a, b], 0.0)))
    return z_sum(confidence, power) * se


def discordance(blocks: Sequence[Outcomes], a: int, b: int) -> float | None:
    """Share of units on which two solutions' 0/1 outcomes differ (None when the outcomes are not
    0/1 per unit: clusters hold several units, or values are not accuracies). Needs unit blocks."""
    total, n = 0.0, 0.0
    for blk in blocks:
        if np.any(blk.counts != 1):
            return None
        x, y = blk.totals[:, a], blk.totals[:, b]
        if not (np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all()):
            return None
        total += float(np.sum(x != y))
        n += len(x)
    return total / n if n else None


# -- from result dicts ------------------------------------------------------------------------------

def outcome_bits(s: str) -> np.ndarray:
    """A stored outcome string ("0110...", :data:`depthprune.results.schema` ``item_outcomes``) as 0./1. floats."""
    return np.frombuffer(s.encode(), dtype=np.uint8).astype(float) - 48


def accuracy_blocks(results: Sequence[Mapping[str, Any]], tasks: Sequence[str],
                    headline: Callable[[str], str]) -> list[Outcomes] | None:
    """One block per task of the solutions' headline-metric outcomes, clustered by the result's
    ``item_clusters`` where it has them. None when any result lacks a task's outcomes, the item
    lists differ, or the clusters differ (the solutions were not evaluated on the same items)."""
    blocks = []
    for task in tasks:
        metric = headline(task)
        strings = [(r.get("item_outcomes") or {}).get(task, {}).get(metric) for r in results]
        if not strings or any(not s for s in strings) or len({len(s) for s in strings}) != 1:
            return None
        clusters = [(r.get("item_clusters") or {}).get(task) for r in results]
        if any(c != clusters[0] for c in clusters):
            return None
        if clusters[0] is not None and len(clusters[0]) != len(strings[0]):
            return None
        blocks.append(Outcomes.from_units(np.stack([outcome_bits(s) for s in strings], axis=1), clusters[0]))
    return blocks or None


def window_blocks(results: Sequence[Mapping[str, Any]], dataset: str = "c4") -> list[Outcomes] | None:
    """The solutions' per-window mean NLLs on ``dataset`` as one block (each window its own unit:
    windows are consecutive stretches of the concatenated split). None when any result lacks them
    or their windows differ in number."""
    rows: list[Any] = [(r.get("window_nll") or {}).get(dataset) for r in results]
    if not rows or any(not w for w in rows) or len({len(w) for w in rows}) != 1:
        return None
    return [Outcomes.from_units(np.array(rows, dtype=float).T)]

