"""The scorer's prefix cache: hidden states at layer boundaries, kept by usefulness under a byte budget.

A state entering block ``b`` depends only on ``removed ∩ [0, b)``, so it is keyed by
``(b, removed ∩ [0, b))`` (:func:`boundary_key`). The cache keeps the dense model's states
always, and the states of the ``keep_best`` best sets of each size (the sets searchers extend
next); the byte budget is enforced least-recently-used first. Its own module because two
users share the one policy: the :class:`~depthprune.scoring.Scorer` that holds tensors, and
:func:`~depthprune.request_cost.replay_cost`, which replays the policy without them to count a
search's cost.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import torch

Key = tuple[int, frozenset[int]]


def boundary_key(b: int, removed: Iterable[int]) -> Key:
    """The cache key of the state entering block ``b`` under removal set ``removed``."""
    return b, frozenset(i for i in removed if i < b)


@dataclass
class _Entry:
    states: list[torch.Tensor]
    owner: frozenset[int]
    nbytes: int


class StateCache:
    """Boundary states under a byte budget; see the module docstring for the policy."""

    def __init__(self, max_bytes: int, keep_best: int) -> None:
        self.max_bytes = max_bytes
        self.keep_best = keep_best
        self.entries: OrderedDict[Key, _Entry] = OrderedDict()  # LRU order: oldest first
        self.owned: dict[frozenset[int], list[Key]] = {}
        self.ranking: dict[int, list[tuple[float, tuple[int, ...]]]] = {}
        self.bytes = 0
        self.peak = 0

    def deepest(self, removed: frozenset[int], n_layers: int) -> tuple[int, _Entry | None]:
        for b in range(n_layers, 0, -1):
            entry = self.entries.get(boundary_key(b, removed))
            if entry is not None:
                self.entries.move_to_end(boundary_key(b, removed))
                return b, entry
        return 0, None

    def _drop(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.nbytes

    def _drop_owner(self, owner: frozenset[int]) -> None:
        for key in self.owned.pop(owner, []):
            entry = self.entries.get(key)
            if entry is not None and entry.owner == owner:
                self._drop(key)

    def offer(self, owner: frozenset[int], loss: float, states: dict[Key, list[torch.Tensor]]) -> None:
        """Keep ``states`` (computed while scoring ``owner``) if ``owner`` ranks high enough."""
        if owner:
            ranked = self.ranking.setdefault(len(owner), [])
            me = (loss if not math.isnan(loss) else math.inf, tuple(sorted(owner)))
            ranked.append(me)
            ranked.sort()
            while len(ranked) > self.keep_best:
                _, loser = ranked.pop()
                self._drop_owner(frozenset(loser))
            if me not in ranked:
                return
        keys = self.owned.setdefault(owner, [])
        for key, tensors in states.items():
            if key in self.entries:
                continue
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            self.entries[key] = _Entry(tensors, owner, nbytes)
            self.bytes += nbytes
            keys.append(key)
        while self.bytes > self.max_bytes and self.entries:
            self._drop(next(iter(self.entries)))
        self.peak = max(self.peak, self.bytes)

    def clear(self) -> None:
        self.entries.clear()
        self.owned.clear()
        self.ranking.clear()
        self.bytes = 0
