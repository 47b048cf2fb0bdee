"""An lm-eval model that computes each shared prefix of a loglikelihood batch once.

lm-eval's tasks and metrics are untouched: :class:`SharedPrefixLM` *is* lm-eval's
``HFLM`` (same tokenisation, ``_encode_pair``, empty-context rule, left truncation to
``max_length + 1`` tokens, per-request ``(logprob, is_greedy)``); only its
``_loglikelihood_tokens`` is replaced. Stock ``HFLM`` runs every (context, continuation)
pair as its own sequence and takes a full-vocabulary log-softmax over every position of
the batch. Here:

* requests are sorted by their input tokens and packed into rows: one copy of the
  prefix they share (a multiple-choice item's context; Winogrande's stem), then each
  request's own remaining tokens, with a 4D attention mask (a branch sees the prefix and
  itself) and position ids that continue the prefix, so every request is computed exactly
  as if it ran alone (the layout of :mod:`depthprune.objectives.margin`). A request is
  added to a row only while that saves tokens: with k branches, shrinking the shared
  prefix from P to P' costs (k-1)(P-P') tokens and saves P';
* only the positions whose logits lm-eval reads (the continuation's) go through the
  output head, a chunk of tokens at a time (:class:`~depthprune.model.output_head.OutputHead`,
  which applies the architecture's logit scaling / softcap), so memory does not grow
  with vocabulary x batch x length;
* no KV cache is used (``use_cache=False``): one forward per batch of rows, and the
  renumbered ``layer_idx`` of the reversible view (:mod:`depthprune.model.masking`) plays no part;
* below the first removed block a pruned model *is* the dense model: told how many leading
  blocks of its view are the dense model's (``dense_blocks``: the first removed index), a
  batch starts from the deepest dense state an earlier evaluation of the same batch stored
  (:mod:`depthprune.scoring.dense_states`: exact, under a byte budget, checked per architecture).

Numerics: the same model on the same tokens, in other shapes, so log-probs agree with
stock ``HFLM`` to float rounding (tested: ``|diff| <= 1e-4`` in float32, every metric and every
per-item outcome equal). The log-softmax is taken in float32 (stock: in the logits' dtype
unless ``softmax_dtype`` is set), so on bf16 models ours is the more precise of the two.

Where packing would be wrong it is not used, and those requests go to stock ``HFLM``:
a seq2seq backend, ``batch_size="auto"``, and (custom masks replace a sliding window)
requests longer than the model's sliding window. ``loglikelihood_rolling`` uses lm-eval's
own windowing and lands here too (one row per window: the same tokens as stock, but no
full-vocabulary logits); ``generate_until`` is stock. On its first call the adapter
checks one request against a plain forward of the model (``verify``) and falls back to
stock ``HFLM`` with a warning if they differ.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from depthprune.model.decoder_layers import find_decoder_layers
from depthprune.model.output_head import OutputHead
from depthprune.scoring.dense_states import DenseStates, dense_states, forward_from_dense

#: lm-eval's request triple after tokenisation: ((context, continuation) | None, context_enc, continuation_enc)
TokRequest = tuple[tuple[str, str] | None, list[int], list[int]]

#: Ours: a packed row is at most this many tokens, or the longest single request if longer.
PACK_TOKENS = 1024

#: Per tokenizer, lm-eval's encoding of each string it was asked for (``HFLM.tok_encode``'s own output, kept):
#: every evaluation of a model builds a new adapter and encodes the same requests again: 0.8-1.0 s of each
#: tiny-llama3 evaluation, 0.05 s remembered (one thread: docs/measurements.md). Keyed by everything it reads.
_ENCODINGS: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], tuple[int, ...]]] = weakref.WeakKeyDictionary()


@dataclass
class _Item:
    """One distinct request: the model input (lm-eval's truncated ``(ctx + cont)[:-1]``) and its targets."""

    inp: tuple[int, ...]
    targets: tuple[int, ...]  # the continuation, predicted by the last len(targets) positions of inp


@dataclass
class _Row:
    """A shared prefix of ``prefix`` tokens and the items that follow it."""

    prefix: int
    items: list[int] = field(default_factory=list)
    width: int = 0

    @property
    def plain(self) -> bool:
        """Every item's input is the prefix itself: an ordinary causal row, no mask needed."""
        return self.width == self.prefix


@dataclass
class AdapterStats:
    """What the adapter ran, against what stock ``HFLM`` would have run (tokens, not seconds)."""

    requests: int = 0
    distinct: int = 0
    rows: int = 0
    forwards: int = 0
    tokens: int = 0  # tokens run through the model (padding excluded)
    stock_tokens: int = 0  # sum of request input lengths: stock HFLM's tokens without padding
    scored: int = 0  # positions sent through the output head
    delegated: int = 0  # requests answered by stock HFLM (sliding window, failed check, unsupported setting)
    check: str = "not run"  # the start-up comparison with stock HFLM: "not run", "passed", "failed"
    block_tokens: int = 0  # block x token computations run
    reused_block_tokens: int = 0  # block x token computations replaced by stored dense states


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(limit, len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def plan_rows(items: Sequence[_Item], cap: int, token_cost: float = 1.0, pair_cost: float = 0.0) -> list[_Row]:
    """Pack items (sorted by input tokens) into rows that share a prefix where that is cheaper.

    A row of width W costs ``token_cost * W + pair_cost * W**2`` per block (projections and
    MLP per token; masked attention over every pair), so an item joins the current row only
    if the joined row costs less than the row and the item apart, and stays within ``cap``.
    Unrelated items that share only a first token are therefore not packed together.
    """

    def cost(width: int) -> float:
        return token_cost * width + pair_cost * width * width

    order = sorted(range(len(items)), key=lambda i: items[i].inp)
    rows: list[_Row] = []
    row: _Row | None = None
    for i in order:
        inp = items[i].inp
        if row is not None:
            first = items[row.items[0]].inp
            p = _common_prefix(first, inp, row.prefix)
            k = len(row.items)
            width = row.width + (k - 1) * (row.prefix - p) + (len(inp) - p)
            if width <= cap and cost(width) < cost(row.width) + cost(len(inp)):
                row.prefix, row.width = p, width
                row.items.append(i)
                continue
        row = _Row(prefix=len(inp), items=[i], width=len(inp))
        rows.append(row)
    return rows


def pack(rows: Sequence[_Row], items: Sequence[_Item], pad: int) -> dict[str, torch.Tensor]:
    """Right-padded ids, position ids and 4D boolean mask of ``rows``; where each item is scored.

    Item token ``j`` of its input sits at column ``j`` if ``j`` is in the shared prefix, else
    at its branch's start + ``j - prefix``; its position id is ``j`` either way.
    """
    width = max(r.width for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), 1, width, width), dtype=torch.bool)
    sel_rows: list[int] = []
    sel_cols: list[int] = []
    targets: list[int] = []
    owner: list[int] = []
    for r, row in enumerate(rows):
        P = row.prefix
        ids[r, :P] = torch.tensor(items[row.items[0]].inp[:P])
        positions[r, :P] = torch.arange(P)
        mask[r, 0, :P, :P] = torch.ones(P, P, dtype=torch.bool).tril()
        start = P
        for i in row.items:
            inp, tgt = items[i].inp, items[i].targets
            n = len(inp) - P
            if n:
                ids[r, start : start + n] = torch.tensor(inp[P:])
                positions[r, start : start + n] = torch.arange(P, len(inp))
                mask[r, 0, start : start + n, :P] = True
                mask[r, 0, start : start + n, start : start + n] = torch.ones(n, n, dtype=torch.bool).tril()
            for j in range(len(inp) - len(tgt), len(inp)):
                sel_rows.append(r)
                sel_cols.append(j if j < P else start + j - P)
            targets.extend(tgt)
            owner.extend([i] * len(tgt))
            start += n
        for t in range(start, width):  # padding attends to itself only (no row of the mask is empty)
            mask[r, 0, t, t] = True
    return {"input_ids": ids, "position_ids": positions, "attention_mask": mask, "rows": torch.tensor(sel_rows),
            "cols": torch.tensor(sel_cols), "targets": torch.tensor(targets), "owner": torch.tensor(owner)}


class SharedPrefixLM(HFLM):
    """lm-eval's ``HFLM`` whose loglikelihood requests share prefixes (module docstring).

    ``pack_tokens``: the longest packed row (ours, 1024; a single longer request gets a row of
    its own). A forward holds at most ``batch_size x`` (the longest request's input) tokens,
    the size of stock ``HFLM``'s widest batch. ``head_chunk_tokens``: positions per output-head
    call (None: :class:`~depthprune.model.output_head.OutputHead`'s default, 2048). ``verify``: check one request against
    stock ``HFLM`` on the first call. ``dense_blocks``: how many leading blocks of the model's
    current view are the dense model's own first blocks (the first removed index; the block
    count for the dense model; 0, the default: none claimed, nothing stored or reused).
    ``dense_store``: where those states live (default: :func:`~depthprune.scoring.dense_states.dense_states` of the model).
    Other arguments are ``HFLM``'s.
    """

    def __init__(self, *args, pack_tokens: int = PACK_TOKENS, head_chunk_tokens: int | None = None,
                 verify: bool = True, dense_blocks: int = 0, dense_store: DenseStates | None = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pack_tokens = int(pack_tokens)
        self.head_chunk_tokens = head_chunk_tokens
        self._verify_pending = verify
        self._packing_ok = True
        self.stats = AdapterStats()
        if isinstance(dense_blocks, bool) or not isinstance(dense_blocks, int) or dense_blocks < 0:
            raise ValueError(f"dense_blocks must be an integer >= 0, got {dense_blocks!r}")
        self.dense_blocks = dense_blocks
        self.dense_store = dense_store if dense_store is not None else (
            dense_states(self.model) if dense_blocks else None)

    # -- which requests can be packed -------------------------------------------------------
    def _packable(self) -> bool:
        return self._packing_ok and self.backend == "causal" and isinstance(self.batch_size, int)

    def _sliding_window(self) -> int | None:
        """The window a custom mask would silently drop, if the model has one."""
        config = self.model.config
        window = getattr(config, "sliding_window", None)
        types = getattr(config, "layer_types", None)
        if not window or (types is not None and "sliding_attention" not in types):
            return None
        if getattr(config, "use_sliding_window", True) is False:
            return None
        return int(window)

    # -- lm-eval API ---------------------------------------------------------------------------
    def tok_encode(self, string: str, *args: Any, **kwargs: Any) -> list[int]:
        """``HFLM.tok_encode``, remembered per tokenizer across evaluations (:data:`_ENCODINGS`). The key holds
        every input of the encoding: the string, lm-eval's arguments, its BOS settings and the vocabulary's size
        (a token added since is a new vocabulary). A caller gets a list of its own."""
        try:
            key = (string, args, tuple(sorted(kwargs.items())), self.add_bos_token, self.prefix_token_id,
                   len(self.tokenizer))
            hash(key)
            memo = _ENCODINGS.setdefault(self.tokenizer, {})
        except TypeError:  # an unhashable argument, or a tokenizer that takes no weak reference: not remembered
            return super().tok_encode(string, *args, **kwargs)
        if key not in memo:
            memo[key] = tuple(super().tok_encode(string, *args, **kwargs))
        return list(memo[key])

    def _loglikelihood_tokens(self, requests: list[TokRequest], disable_tqdm: bool = False,
                              override_bs: int | None = None) -> list[tuple[float, bool]]:
        if not requests:
            return []
        if not self._packable():
            self.stats.delegated += len(requests)
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
        window = self._sliding_window()
        mine: list[Any] = []
        theirs: list[Any] = []
        for n, (_, ctx, cont) in enumerate(requests):
            assert len(ctx) > 0 and 0 < len(cont) <= self.max_length  # lm-eval's own checks
            inp_len = min(len(ctx) + len(cont), self.max_length + 1) - 1
            (theirs if window is not None and inp_len > window else mine).append(n)
        results: list[tuple[float, bool] | None] = [None] * len(requests)
        if mine:
            for n, answer in zip(mine, self._packed([requests[n] for n in mine], disable_tqdm), strict=True):
                results[n] = answer
        if theirs:
            self.stats.delegated += len(theirs)
            stock = super()._loglikelihood_tokens([requests[n] for n in theirs], disable_tqdm=disable_tqdm,
                                                  override_bs=override_bs)
            for n, answer in zip(theirs, stock, strict=True):
                results[n] = answer
        return results  # type: ignore[return-value]

    def _packed(self, requests: list[TokRequest], disable_tqdm: bool) -> list[tuple[float, bool]]:
        items: list[_Item] = []
        index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        which: list[int] = []
        for _, ctx, cont in requests:
            full = (ctx + cont)[-(self.max_length + 1):]
            key = (tuple(full[:-1]), tuple(cont))
            if key not in index:
                index[key] = len(items)
                items.append(_Item(*key))
            which.append(index[key])
        answers, probe = self._score(items, disable_tqdm)
        if self._verify_pending:
            self._verify_pending = False
            self._packing_ok = self._agrees(items[probe], answers[probe])
            self.stats.check = "passed" if self._packing_ok else "failed"
            if not self._packing_ok:
                self.stats.delegated += len(requests)
                return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm)
        out = []
        for (request_str, _, _), i in zip(requests, which, strict=True):
            answer = answers[i]
            if request_str is not None:
                self.cache_hook.add_partial("loglikelihood", request_str, answer)
            out.append(answer)
        self.stats.requests += len(requests)
        self.stats.distinct += len(items)
        # stock HFLM with its logits cache runs each distinct input once
        self.stats.stock_tokens += sum(len(inp) for inp in {it.inp for it in items})
        return out

    def _score(self, items: list[_Item], disable_tqdm: bool) -> tuple[list[tuple[float, bool]], int]:
        """(log-prob, is_greedy) of every item, and the item the start-up check probes: the
        shortest one whose tokens follow a shared prefix in a packed row (else the shortest)."""
        decoder = find_decoder_layers(self.model)
        head = OutputHead(self.model) if self.head_chunk_tokens is None else OutputHead(
            self.model, chunk_tokens=self.head_chunk_tokens)
        longest = max(len(it.inp) for it in items)
        # per block: one multiply-add per parameter per token; QK^T and AV per (query, key) pair
        block = sum(p.numel() for p in decoder.layers[0].parameters()) if len(decoder) else 0
        width = self.model.get_input_embeddings().embedding_dim
        rows = plan_rows(items, cap=max(self.pack_tokens, longest), token_cost=float(block),
                         pair_cost=2.0 * float(width))
        # plain rows run as stock HFLM runs them (the model's own causal mask); packed rows need ours
        rows.sort(key=lambda r: (not r.plain, -r.width))
        branched = [i for r in rows for i in r.items if len(items[i].inp) > r.prefix]
        probe = min(branched or range(len(items)), key=lambda i: (len(items[i].inp), i))
        budget = self.batch_size * longest  # tokens of stock HFLM's widest batch
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eot_token_id
        logp = torch.zeros(len(items), dtype=torch.float64)
        misses = torch.zeros(len(items), dtype=torch.long)
        pbar = tqdm(total=len(items), disable=disable_tqdm or self.rank != 0,
                    desc="Running loglikelihood requests (shared prefixes)")
        start = 0
        while start < len(rows):
            stop = min(len(rows), start + max(1, budget // rows[start].width))
            stop = next((j for j in range(start + 1, stop) if rows[j].plain != rows[start].plain), stop)
            batch = rows[start:stop]
            start = stop
            packed = pack(batch, items, pad)
            inputs = {"input_ids": packed["input_ids"].to(self.device)}
            if not batch[0].plain:
                inputs["attention_mask"] = packed["attention_mask"].to(self.device)
                inputs["position_ids"] = packed["position_ids"].to(self.device)
            with torch.no_grad(), torch.autocast(device_type=self.device.type, dtype=self.mixed_precision_dtype,
                                                 enabled=self.mixed_precision_dtype is not None):
                hidden = self._forward(inputs)
                chosen = hidden[packed["rows"].to(self.device), packed["cols"].to(self.device)]
                lp, greedy = self._target_logprobs(head, chosen, packed["targets"].to(self.device))
            owner = packed["owner"]
            logp.index_add_(0, owner, lp.double().cpu())
            misses.index_add_(0, owner, (~greedy).long().cpu())
            self.stats.rows += len(batch)
            self.stats.forwards += 1
            self.stats.tokens += sum(r.width for r in batch)
            self.stats.scored += len(owner)
            pbar.update(sum(len(r.items) for r in batch))
        pbar.close()
        return [(float(logp[i]), bool(misses[i] == 0)) for i in range(len(items))], probe

    def _forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The last hidden states of one batch, from the deepest usable stored dense state."""
        hidden, ran, reused = forward_from_dense(self.model, inputs, self.dense_blocks, self.dense_store)
        self.stats.block_tokens += ran
        self.stats.reused_block_tokens += reused
        return hidden

    @staticmethod
    def _target_logprobs(head: OutputHead, hidden: torch.Tensor,
                         targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log p(target) and whether the target is the argmax, ``head.chunk_tokens`` positions at a time."""
        lps, greedy = [], []
        for s in range(0, hidden.shape[0], head.chunk_tokens):
            tgt = targets[s : s + head.chunk_tokens]
            # a log-softmax per cache-sized slice of rows: bit-identical to one over the chunk, without
            # a second chunk-sized tensor (2 GB per 2,048 positions of gemma3's vocabulary)
            for rows, logits in head.logit_rows(hidden[s : s + head.chunk_tokens]):
                logprobs = torch.log_softmax(logits, dim=-1)
                lps.append(logprobs.gather(-1, tgt[rows, None]).squeeze(-1))
                greedy.append(logprobs.argmax(dim=-1) == tgt[rows])
        return torch.cat(lps), torch.cat(greedy)

    def _agrees(self, item: _Item, answer: tuple[float, bool]) -> bool:
        """One item through stock ``HFLM``'s own code path: packing must reproduce it."""
        ctx = list(item.inp[: len(item.inp) - len(item.targets) + 1])
        ((stock_lp, stock_greedy),) = super()._loglikelihood_tokens([(None, ctx, list(item.targets))],
                                                                    disable_tqdm=True)
        fp32 = next(self.model.parameters()).dtype == torch.float32 and self.mixed_precision_dtype is None
        tol = (1e-4 if fp32 else 5e-2) * max(1.0, abs(stock_lp))
        if abs(stock_lp - answer[0]) <= tol and (stock_greedy == answer[1] or not fp32):
            return True
        warnings.warn(f"shared-prefix scoring does not reproduce HFLM for {type(self.model).__name__} "
                      f"(log-prob {answer[0]:.6g} vs {stock_lp:.6g}, greedy {answer[1]} vs {stock_greedy}); "
                      "falling back to stock HFLM", stacklevel=3)
        return False
