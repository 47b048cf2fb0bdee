"""The scorer's prefix cache: hidden states at layer boundaries, kept by usefulness under a byte budget.

A state entering block ``b`` depends only on ``removed ∩ [0, b)``, so it is keyed by
``(b, removed ∩ [0, b))`` (:func:`boundary_key`). The cache keeps the dense model's states
always, and the states of the ``keep_best`` best sets of each size (the sets searchers extend
next); the byte budget is enforced least-recently-used first. Its own module because two
users share the one policy: the :class:`~depthprune.scoring.scorer.Scorer` that holds tensors, and
:func:`~depthprune.scoring.request_cost.replay_cost`, which replays the policy without them to count a
search's cost.

With ``spare=True`` (the scorer's default) the cache also holds every other set's states while the
budget has room: *spares*, dropped first, least recently used first, whenever room is needed. A
searcher's next sets often share a prefix with sets outside the best few (GA's offspring with any
parent, beam's candidates with any of the beam's), so they resume deeper and run fewer blocks. The
kept-best states are the same with or without spares, and a resumed set is the same forward on the
same input, so losses are the same bits; only this process's work shrinks. A search's *counted*
cost replays the policy without spares (:func:`~depthprune.scoring.request_cost.replay_cost`), so it stays
a function of the searcher's requests alone, comparable across machines and memory sizes.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

Key = tuple[int, frozenset[int]]


def boundary_key(b: int, removed: Iterable[int]) -> Key:
    """The cache key of the state entering block ``b`` under removal set ``removed``."""
    return b, frozenset(i for i in removed if i < b)


def shared_boundaries(order: Sequence[frozenset[int]], n_layers: int) -> list[Key | None]:
    """For each set of ``order``, the deepest boundary state that an earlier set of ``order`` passes and it can
    resume from, where that is deeper than the dense state entering its first removed block (which the cache
    keeps); else None.

    Two sets agree on ``[0, b)``, ``b`` the smallest block in one but not the other, so ``t`` may start from
    the output of its last kept block before the largest such ``b`` over the sets before it. Run in this order,
    resuming so, the sets compute each block of their prefix tree once (:meth:`depthprune.scoring.scorer.Scorer.prefetch`)."""
    out: list[Key | None] = []
    for i, t in enumerate(order):
        b = max((min(u ^ t) for u in order[:i] if u != t), default=0)
        kept = [k for k in range(min(b, n_layers)) if k not in t]
        out.append(boundary_key(kept[-1] + 1, t) if t and kept and kept[-1] + 1 > min(t) else None)
    return out


#: the owner of a state held for one run (:meth:`StateCache.lend`): no removal set, so no ranking drops it
_LENT: frozenset[int] = frozenset({-1})


@dataclass
class _Entry:
    states: list[torch.Tensor]
    owner: frozenset[int]
    nbytes: int


class StateCache:
    """Boundary states under a byte budget; see the module docstring for the policy."""

    def __init__(self, max_bytes: int, keep_best: int, spare: bool = False) -> None:
        self.max_bytes = max_bytes
        self.keep_best = keep_best
        self.spare = spare
        self.entries: OrderedDict[Key, _Entry] = OrderedDict()  # LRU order: oldest first
        self.spares: OrderedDict[Key, None] = OrderedDict()  # the entries no kept set owns, LRU order
        self.owned: dict[frozenset[int], list[Key]] = {}
        self.ranking: dict[int, list[tuple[float, tuple[int, ...]]]] = {}
        self.bytes = 0
        self.peak = 0

    def deepest(self, removed: frozenset[int], n_layers: int) -> tuple[int, _Entry | None]:
        for b in range(n_layers, 0, -1):
            key = boundary_key(b, removed)
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
                if key in self.spares:
                    self.spares.move_to_end(key)
                return b, entry
        return 0, None

    def _drop(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        self.spares.pop(key, None)
        if entry is not None:
            self.bytes -= entry.nbytes

    def _demote(self, owner: frozenset[int]) -> None:
        """``owner`` left the best of its size: its states become spares (or go, without spares)."""
        if not self.spare:
            self._drop_owner(owner)
            return
        for key in self.owned.pop(owner, []):
            entry = self.entries.get(key)
            if entry is not None and entry.owner == owner:
                self.spares[key] = None

    def _make_room(self, nbytes: int, spares_only: bool = False) -> bool:
        """Drop spares, then (unless ``spares_only``) any state, least recently used first, until ``nbytes`` more
        fit the budget; whether they fit."""
        while self.bytes + nbytes > self.max_bytes and (self.spares or (self.entries and not spares_only)):
            self._drop(next(iter(self.spares)) if self.spares else next(iter(self.entries)))
        return self.bytes + nbytes <= self.max_bytes

    def _drop_owner(self, owner: frozenset[int]) -> None:
        for key in self.owned.pop(owner, []):
            entry = self.entries.get(key)
            if entry is not None and entry.owner == owner:
                self._drop(key)

    def offer(self, owner: frozenset[int], loss: float, states: dict[Key, list[torch.Tensor]]) -> None:
        """Keep ``states`` (computed while scoring ``owner``) if ``owner`` ranks high enough; as spares if not
        (with ``spare``). A kept set takes over a state a spare holds under the same key."""
        kept = True
        if owner:
            ranked = self.ranking.setdefault(len(owner), [])
            me = (loss if not math.isnan(loss) else math.inf, tuple(sorted(owner)))
            ranked.append(me)
            ranked.sort()
            while len(ranked) > self.keep_best:
                _, loser = ranked.pop()
                self._demote(frozenset(loser))
            kept = me in ranked
            if not kept and not self.spare:
                return
        keys = self.owned.setdefault(owner, []) if kept else []
        for key, tensors in states.items():
            entry = self.entries.get(key)
            if entry is not None:
                if kept and key in self.spares:
                    entry.owner = owner
                    del self.spares[key]
                    keys.append(key)
                continue
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            self.entries[key] = _Entry(tensors, owner, nbytes)
            self.bytes += nbytes
            if kept:
                keys.append(key)
            else:
                self.spares[key] = None
        self._make_room(0)
        self.peak = max(self.peak, self.bytes)

    def lend(self, key: Key, states: list[torch.Tensor]) -> bool:
        """Hold ``states`` under ``key`` until :meth:`take_back` (:meth:`depthprune.scoring.scorer.Scorer.prefetch` hands
        them to later sets), outside the keep-best ranking (LRU eviction may still drop them); False where ``key``
        is held already or the byte budget has no room for them."""
        nbytes = sum(t.numel() * t.element_size() for t in states)
        if key in self.entries or not self._make_room(nbytes, spares_only=True):
            return False
        self.entries[key] = _Entry(states, _LENT, nbytes)
        self.bytes += nbytes
        self.peak = max(self.peak, self.bytes)
        return True

    def take_back(self, key: Key) -> None:
        """Drop a state :meth:`lend` holds (not one a kept set owns under the same key)."""
        entry = self.entries.get(key)
        if entry is not None and entry.owner is _LENT:
            self._drop(key)

    def restart(self) -> None:
        """A new search on this cache: every state but the dense ones becomes a spare (goes, without ``spare``)
        and no set ranks yet, so the states kept from here on are those a fresh cache would keep."""
        for owner in [o for o in self.owned if o]:
            self._demote(owner)
        self.ranking.clear()

    def drop_spares(self) -> None:
        """Free every spare: for a cache that lives on after its burst of sets (a calibration's prior)."""
        for key in list(self.spares):
            self._drop(key)

    def clear(self) -> None:
        self.spares.clear()
        self.entries.clear()
        self.owned.clear()
        self.ranking.clear()
        self.bytes = 0
