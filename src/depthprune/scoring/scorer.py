"""The scoring engine: removal set -> calibration loss, as few layer-forwards as possible.

Every searcher's cost is forward passes, so this is the hot path. A :class:`Scorer` is
the ``score`` callable that searchers receive. It

* memoises losses by removal set;
* keeps a cache of hidden states at layer *boundaries* (the input of block ``b``),
  keyed by ``(b, removed ∩ [0, b))`` — the only thing that state depends on. A
  candidate resumes from the deepest boundary whose key is cached, so in a greedy step
  the candidate that first differs from its base at block ``j`` runs only blocks ``≥ j``;
* decides what to keep by usefulness: the dense model's states always, and the states
  of the ``keep_best`` best sets of each size (the sets searchers extend next: greedy's
  and beam's bases, GA's elites, BO's incumbents), and every other set's states as *spares*
  while the budget has room (dropped first); the byte budget is enforced least-recently-used
  first, so memory stays bounded whatever the search does;
* runs the model's *own* forward (masks, rotary embeddings, norms) on a view of the
  kept blocks (:mod:`depthprune.model.masking`) and injects a cached state with a forward
  pre-hook — no architecture is re-implemented, and a self-check at start-up proves
  that resuming equals a full forward for this model (or turns the cache off);
* counts evaluations, layer-forwards (one block over the whole calibration set = 1)
  and seconds, and reports them in :class:`ScorerStats`.

The cache's policy is :mod:`depthprune.scoring.state_cache`, and the cost of a request log as if it
had run alone is :mod:`depthprune.scoring.request_cost` (:func:`replay_cost`); both are re-exported here.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from depthprune.common.machine import device_memory, local_workers
from depthprune.model.masking import check_removed, hidden_of, keep_only, restore
from depthprune.objectives.base import Batch, Objective
from depthprune.scoring.calibration import CalibrationData
from depthprune.scoring.gates import energy_passes, quadratic_energy
from depthprune.scoring.request_cost import BLOCK_INFLUENCE, ENERGY, ReplayedCost, Request, replay_cost
from depthprune.scoring.state_cache import Key, StateCache, boundary_key, shared_boundaries

__all__ = ["BLOCK_INFLUENCE", "ENERGY", "Key", "ReplayedCost", "Request", "Scorer", "ScorerStats", "StateCache",
           "boundary_key", "replay_cost", "token_weights"]


@dataclass
class ScorerStats:
    evaluations: int = 0  # distinct removal sets run through the model
    layer_forwards: int = 0  # block applications, in units of the full calibration set
    seconds: float = 0.0
    resumed: int = 0  # runs that started from a cached boundary instead of the embeddings
    layer_backwards: int = 0  # block backward passes (gate gradients for the cbo energy)
    verify_layer_forwards: int = 0  # spent by the start-up self-check (not in layer_forwards)
    peak_cache_bytes: int = 0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _default_cache_bytes(device: torch.device) -> int:
    """40% of a GPU's free memory (a worker per GPU); on a CPU a quarter of its memory, split among the local
    workers that share it (:func:`depthprune.common.machine.local_workers`): the spares fill whatever budget there is."""
    if device.type == "cuda":
        return int(device_memory(device) * 0.4)
    return int(device_memory(device) * 0.25 / local_workers())


def token_weights(batch: Batch) -> torch.Tensor:
    """[b, t] 1.0 for real tokens, 0.0 for padding, read from the batch's attention mask
    (2D: as given; 4D packed: a token is real if it attends to an earlier one, or is first)."""
    mask = batch.forward_kwargs.get("attention_mask")
    b, t = batch.input_ids.shape
    if mask is None:
        return torch.ones(b, t)
    if mask.dim() == 2:
        return mask.float()
    back = mask[:, 0].bool().tril(-1).any(-1)
    back[:, 0] = True
    return back.float()


class Scorer:
    """``score(removed) -> loss`` for one model, objective and calibration set.

    Also offers ``many(sets)`` (a batch) and ``energy()`` (a quadratic model of the loss
    over the removal vector, from gate gradients) for searchers that use them. Every
    request is logged in order (``requests``, memo hits included), so a search's cost
    can be recounted as if it had run alone (:func:`replay_cost`).
    """

    def __init__(
        self,
        model: nn.Module,
        batches: Sequence[Batch],
        objective: Objective,
        *,
        prefix_cache: bool = True,
        cache_bytes: int | None = None,
        keep_best: int = 4,
        verify: bool = True,
        dense_pass: bool = True,
        spare_states: bool = True,
    ) -> None:
        """``spare_states``: also keep sets outside the ``keep_best`` as spares while the budget has room
        (:mod:`depthprune.scoring.state_cache`; the losses and the counted cost are the same either way).
        ``dense_pass=False``: no dense run at start-up (``dense_loss`` stays NaN) and no prefix
        cache, so every set runs from the embeddings: cheaper where only a few sets are
        scored, whose resumed blocks would save less than the dense pass costs (``depthprune verify``'s
        small samples: :func:`depthprune.verify.second.check_scorer`). An objective that takes its
        reference from the dense run (KL) needs it."""
        if not dense_pass and objective.needs_reference:
            raise ValueError(f"objective {objective.name!r} takes its reference from the dense pass: "
                             "dense_pass=False is not possible for it")
        data = CalibrationData.build(model, batches, objective)
        max_bytes = cache_bytes if cache_bytes is not None else _default_cache_bytes(data.device)
        self._setup(data, prefix_cache and dense_pass, StateCache(max_bytes, keep_best, spare_states), memo={})
        self._check_custom_masks()
        if not dense_pass:
            return
        self.dense_loss = self(frozenset())
        self.requests.clear()  # the dense run is every scorer's, not a request of the search
        if verify and prefix_cache and self.n_layers >= 2:
            self._verify()

    def _setup(self, data: CalibrationData, prefix_cache: bool, cache: StateCache,
               memo: dict[frozenset[int], float]) -> None:
        """Every attribute a scorer has; forks share ``data`` (read-only) and nothing else."""
        self.data = data
        self.n_layers = data.n_layers
        self.prefix_cache = prefix_cache
        self.cache = cache
        self.memo = memo
        self.stats = ScorerStats()
        self.requests: list[Request] = []
        self.set_seconds: dict[frozenset[int], float] = {}  # wall time of each set this scorer ran
        self.dense_loss = memo.get(frozenset(), math.nan)
        self._inject: torch.Tensor | None = None
        self._capture_budget = 0
        self._energy: tuple[list[float], list[list[float]]] | None = None
        self._energy_requested = False
        self.energy_seconds: float | None = None  # set when this scorer computed the energy itself
        self.sink: Callable[[frozenset[int], float, float], None] | None = None
        self._cosine: list[float] | None = None  # mean cos(block input, block output), dense model

    # Read-only views of the shared calibration data.
    model = property(lambda self: self.data.model)
    batches = property(lambda self: self.data.batches)
    objective = property(lambda self: self.data.objective)
    decoder = property(lambda self: self.data.decoder)
    head = property(lambda self: self.data.head)
    final_norm = property(lambda self: self.data.final_norm)
    device = property(lambda self: self.data.device)

    def fork(self, known: dict[frozenset[int], float] | None = None,
             energy: tuple[list[float], list[list[float]]] | None = None,
             sink: Callable[[frozenset[int], float, float], None] | None = None,
             reuse: Scorer | None = None) -> Scorer:
        """A scorer with fresh memo, counters and request log over the same calibration data.

        It starts from this scorer's dense states (so no dense pass is repeated) and
        ``known`` losses (e.g. the shared single-removal prior) in its memo: they were paid
        for once, elsewhere, and are not counted again here. ``energy``: the condition's
        gate-gradient energy, computed once elsewhere (:meth:`depthprune.scoring.scorer.Scorer.energy`
        still logs its request).
        ``sink(set, loss, seconds)`` hears of every set this fork computes, as it is computed
        (the score store: :mod:`depthprune.scoring.score_store`).
        ``reuse``: an earlier fork of this scorer whose cache this one takes over (restarted: its sets' states
        become spares), so a condition's next search resumes from the states its last one computed.
        """
        if frozenset() not in self.memo:
            raise ValueError("a scorer without its dense pass (dense_pass=False) cannot be forked")
        if reuse is not None and reuse.data is not self.data:
            raise ValueError("reuse: a fork of another scorer (other calibration data) cannot lend its states")
        twin = object.__new__(Scorer)
        memo = {frozenset(): self.dense_loss, **(known or {})}
        if reuse is not None:
            cache = reuse.cache
            cache.restart()
        else:
            cache = StateCache(self.cache.max_bytes, self.cache.keep_best, self.cache.spare)
        twin._setup(self.data, self.prefix_cache, cache, memo)
        twin._energy = energy
        twin.sink = sink
        if reuse is None:
            dense_keys = self.cache.owned.get(frozenset(), [])
            twin.cache.offer(frozenset(), self.dense_loss,
                             {k: self.cache.entries[k].states for k in dense_keys if k in self.cache.entries})
        return twin

    # -- public ------------------------------------------------------------------------
    def __call__(self, removed: Iterable[int]) -> float:
        s = check_removed(removed, self.n_layers)
        self.requests.append(s)
        if s not in self.memo:
            self._compute(s)
        return self.memo[s]

    def _compute(self, s: frozenset[int], handoff: Collection[Key] | None = None) -> dict[Key, list[torch.Tensor]]:
        """Run ``s``, memoise and count it. With ``handoff``, capture only those boundary states (for later
        sets of :meth:`prefetch`) and offer none to the keep-best cache; else capture and offer every boundary."""
        start = time.perf_counter()
        loss, states = self._run(s, use_cache=self.prefix_cache, capture=self.prefix_cache and (handoff is None or bool(handoff)),
                                 capture_only=handoff)
        self.set_seconds[s] = time.perf_counter() - start
        self.stats.seconds += self.set_seconds[s]
        self.stats.evaluations += 1
        value = float(loss)
        self.memo[s] = value
        if self.sink is not None:
            self.sink(s, value, self.set_seconds[s])
        if self.prefix_cache and handoff is None:
            self.cache.offer(s, value, states)
        self.stats.peak_cache_bytes = self.cache.peak
        return states

    @property
    def computed_energy(self) -> tuple[list[float], list[list[float]]] | None:
        """The energy this scorer computed itself (None if it was given one, or never asked)."""
        return self._energy if self.energy_seconds is not None else None

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]

    def prefetch(self, sets: Iterable[Iterable[int]], progress: str | None = None) -> None:
        """Score the sets not scored yet into the memo, sharing the blocks their prefixes share, for callers
        that know their sets ahead (``depthprune verify``); what they then ask is answered from the memo.

        The sets run in lexicographic order of their sorted blocks, as a walk of the tree their prefixes make:
        each resumes from the deepest boundary state an earlier one passed
        (:func:`depthprune.scoring.state_cache.shared_boundaries`), captured by the first set that passed it, so each
        block of the tree runs once (where the cache's byte budget holds the states handed on; else a set
        resumes from a shallower one). Resuming is a forward on the same input: the losses are the same bits
        as one call each (tests). No state is offered to the keep-best cache and no request is
        logged, so a search's cost is not what this changes: searchers' ``score.many`` is one call each.
        ``progress``: a progress bar's label, where one is wanted."""
        order = sorted({check_removed(s, self.n_layers) for s in sets} - set(self.memo), key=sorted)
        if not self.prefix_cache:
            for s in tqdm(order, desc=progress, unit="set", disable=progress is None, leave=False):
                self._compute(s)
            return
        capture: dict[int, set[Key]] = {}
        last_use: dict[Key, int] = {}
        for i, key in enumerate(shared_boundaries(order, self.n_layers)):
            if key is None:
                continue
            first = next(j for j in range(i) if boundary_key(key[0], order[j]) == key)  # the first to pass it
            capture.setdefault(first, set()).add(key)
            last_use[key] = i
        lent: list[Key] = []
        try:
            for i, s in enumerate(tqdm(order, desc=progress, unit="set", disable=progress is None, leave=False)):
                states = self._compute(s, handoff=capture.get(i, set()))
                lent += [k for k, v in states.items() if v and self.cache.lend(k, v)]
                for k in [k for k in lent if last_use[k] <= i]:
                    self.cache.take_back(k)
                    lent.remove(k)
        finally:
            for k in lent:
                self.cache.take_back(k)

    def energy(self) -> tuple[list[float], list[list[float]]]:
        """Quadratic model (h, J) of the loss over the removal vector; see :mod:`depthprune.scoring.gates`."""
        self.requests.append(ENERGY)
        if not self._energy_requested:
            # the dense and single losses are requested even when the energy was given (fork), so
            # the request log, and the cost replayed from it, is the same either way
            self._energy_requested = True
            base = self(frozenset())
            h = [self(frozenset([i])) - base for i in range(self.n_layers)]
            if self._energy is None:
                start = time.perf_counter()
                self._energy = quadratic_energy(self.data, h)
                forwards, backwards = energy_passes(self.n_layers)
                self.stats.layer_forwards += forwards
                self.stats.layer_backwards += backwards
                self.energy_seconds = time.perf_counter() - start
                self.stats.seconds += self.energy_seconds
        assert self._energy is not None
        return self._energy

    def block_influence(self, metric: str = "cosine") -> list[float]:
        """Per block, how much it changes its input on the dense model (ShortGPT's Block
        Influence 1 − cos, or the angular distance arccos(cos)/π), token-weighted over the
        calibration set (padding excluded). One dense pass with hooks, counted once."""
        if metric not in ("cosine", "angular"):
            raise ValueError(f"block_influence: metric must be 'cosine' or 'angular', got {metric!r}")
        self.requests.append(BLOCK_INFLUENCE)
        if self._cosine is None:
            start = time.perf_counter()
            self._cosine = self._dense_cosines()
            self.stats.layer_forwards += self.n_layers
            self.stats.seconds += time.perf_counter() - start
        if metric == "cosine":
            return [1.0 - c for c in self._cosine]
        return [math.acos(max(-1.0, min(1.0, c))) / math.pi for c in self._cosine]

    def _dense_cosines(self) -> list[float]:
        layers = self.decoder.layers
        sums = torch.zeros(self.n_layers, dtype=torch.float64)
        count = 0.0
        inputs: dict[int, torch.Tensor] = {}
        hooks = []

        def pre(k):
            def hook(module, args, kwargs):
                inputs[k] = args[0] if args else kwargs["hidden_states"]
            return hook

        def post(k, weights_ref):
            def hook(module, args, output):
                cos = torch.nn.functional.cosine_similarity(inputs.pop(k).float(), hidden_of(output).float(), dim=-1)
                sums[k] += (cos.double().cpu() * weights_ref[0]).sum()
            return hook

        weights_ref: list[torch.Tensor] = [torch.ones(1)]
        for k, layer in enumerate(layers):
            hooks.append(layer.register_forward_pre_hook(pre(k), with_kwargs=True))
            hooks.append(layer.register_forward_hook(post(k, weights_ref)))
        try:
            with torch.no_grad():
                for batch in self.batches:
                    weights_ref[0] = token_weights(batch).double()
                    count += float(weights_ref[0].sum())
                    self.decoder.owner(**batch.model_inputs(self.device), use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        return [float(v) / count for v in sums]

    # -- the forward pass ----------------------------------------------------------------
    def _run(
        self,
        removed: frozenset[int],
        use_cache: bool,
        capture: bool,
        batch_indices: Sequence[int] | None = None,
        hidden_sink: list[torch.Tensor] | None = None,
        capture_only: Collection[Key] | None = None,
    ) -> tuple[torch.Tensor, dict[Key, list[torch.Tensor]]]:
        """Loss of ``removed`` over the chosen micro-batches, resuming where possible; with ``capture``, the
        boundary states it passes (only ``capture_only``'s where given)."""
        L = self.n_layers
        b, entry = self.cache.deepest(removed, L) if use_cache else (0, None)
        kept = [k for k in range(b, L) if k not in removed]
        if entry is not None and not kept and self.final_norm is None:
            b, entry = 0, None  # nowhere to inject: run from the embeddings
            kept = [k for k in range(L) if k not in removed]
        if entry is not None:
            self.stats.resumed += 1
        layers = self.decoder.layers
        hooks = []
        if entry is not None:
            target = layers[kept[0]] if kept else self.final_norm
            hooks.append(target.register_forward_pre_hook(self._inject_hook, with_kwargs=True))
        indices = range(len(self.batches)) if batch_indices is None else batch_indices
        captured: dict[Key, list[torch.Tensor]] = {}
        self._capture_budget = self.cache.max_bytes
        if capture:
            for k in kept:
                key = boundary_key(k + 1, removed)
                if capture_only is not None and key not in capture_only:
                    continue
                captured[key] = []
                hooks.append(layers[k].register_forward_hook(self._capture_hook(captured[key], len(indices))))
        stats: list[torch.Tensor] = []
        undo = keep_only(self.model, kept)
        try:
            with torch.no_grad():
                for m in indices:
                    batch = self.batches[m]
                    self._inject = entry.states[m] if entry is not None else None
                    out = self.decoder.owner(**batch.model_inputs(self.device), use_cache=False)
                    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
                    if hidden_sink is not None:
                        hidden_sink.append(hidden)
                    if not removed and self.objective.needs_reference and batch_indices is None:
                        self.objective.set_reference(m, hidden, batch, self.head)
                    stats.append(self.objective.batch_stats(hidden, batch, self.head))
        finally:
            restore(self.model, undo)
            for h in hooks:
                h.remove()
            self._inject = None
        if batch_indices is None:
            self.stats.layer_forwards += len(kept)
        else:
            self.stats.verify_layer_forwards += len(kept)
        # Keep only complete captures (every micro-batch present).
        n = len(indices)
        states = {k: v for k, v in captured.items() if len(v) == n}
        return self.objective.reduce(stats), states

    def _inject_hook(self, module, args, kwargs):
        state = self._inject
        if state is None:
            return None
        if args:
            return (state, *args[1:]), kwargs
        kwargs = dict(kwargs)
        kwargs["hidden_states"] = state
        return args, kwargs

    def _capture_hook(self, sink: list[torch.Tensor], n_batches: int):
        """Collect one boundary's states; a boundary is taken whole or not at all.

        The first micro-batch reserves room for all of them, so a run never holds more
        than the cache could keep (the memory bound holds during the run, too).
        """
        admitted = [True]

        def hook(module, args, output):
            state = hidden_of(output).detach()
            if not sink:
                need = state.numel() * state.element_size() * n_batches
                admitted[0] = need <= self._capture_budget
                if admitted[0]:
                    self._capture_budget -= need
            if admitted[0]:
                sink.append(state)

        return hook

    def _check_custom_masks(self) -> None:
        """A custom 4D mask replaces the model's own, sliding windows included: refuse
        batches longer than a sliding window rather than silently attend too far."""
        window = getattr(self.model.config, "sliding_window", None)
        types = getattr(self.model.config, "layer_types", None)
        if window is None or (types is not None and "sliding_attention" not in types):
            return
        for batch in self.batches:
            if "attention_mask" in batch.forward_kwargs and batch.input_ids.shape[1] > window:
                raise ValueError(
                    f"{self.objective.name}: packed sequences of {batch.input_ids.shape[1]} tokens exceed the "
                    f"model's sliding window ({window}); use the objective's share_prompt=False"
                )

    # -- start-up self-check -------------------------------------------------------------
    def _verify(self) -> None:
        """Prove on one micro-batch that resuming from a cached state equals a full run.

        Also checks that the output head reproduces the model's own logits. A model whose
        forward does something the hooks cannot see fails here, before any search.
        """
        batch = self.batches[0]
        with torch.no_grad():
            ids = batch.input_ids[:1].to(self.device)
            ref = self.model(input_ids=ids, use_cache=False).logits.float()
            hidden = self.decoder.owner(input_ids=ids, use_cache=False).last_hidden_state
            mine = self.head.logits(hidden)
        tol = 1e-4 if ref.dtype == torch.float32 and hidden.dtype == torch.float32 else 5e-2
        if not torch.allclose(ref, mine, atol=tol * max(1.0, ref.abs().max().item()), rtol=0):
            raise ValueError(
                f"{type(self.model).__name__}: lm_head(final hidden) does not reproduce the model's logits "
                f"(max diff {(ref - mine).abs().max().item():.3g}); this architecture's output head is unsupported"
            )
        probe = frozenset([self.n_layers // 2])
        resumed: list[torch.Tensor] = []
        full: list[torch.Tensor] = []
        self._run(probe, use_cache=True, capture=False, batch_indices=[0], hidden_sink=resumed)
        self._run(probe, use_cache=False, capture=False, batch_indices=[0], hidden_sink=full)
        a, b = resumed[0].float(), full[0].float()
        scale = max(1.0, b.abs().max().item())
        if not torch.allclose(a, b, rtol=0, atol=(1e-5 if tol < 1e-3 else 2e-2) * scale):
            warnings.warn(
                f"prefix cache disabled: resuming at block {self.n_layers // 2} does not reproduce a full "
                f"forward for {type(self.model).__name__} (max |diff| of final hidden states "
                f"{(a - b).abs().max().item():.3g}); every candidate will run from the embeddings",
                stacklevel=2,
            )
            self.prefix_cache = False
            self.cache.clear()
