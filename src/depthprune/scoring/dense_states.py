"""Evaluation from stored dense states: below the first removed block a pruned model is the dense one.

A removal set whose first removed block is k runs blocks 0..k-1 exactly as the dense model
does, so on the same inputs their outputs are the dense model's. Evaluations of many removal
sets on the same fixed inputs (lm-eval's requests, perplexity windows) therefore repeat that
work. :func:`forward_from_dense` runs one forward batch of a model's current view
(:mod:`depthprune.model.masking`) starting from the deepest *stored* dense boundary it may use, and
stores the dense boundaries it passes through on the way, so a later evaluation of the same
batch starts deeper. The store lives with the loaded model (:func:`dense_states`) under a byte
budget: what does not fit is recomputed, as before.

Exactness: a batch is identified by its exact input tensors; a state is stored only from a
forward whose blocks up to it were the dense ones; so a reused state is what a full forward
would compute there (the same kernels on the same inputs, bit for bit on CPU). The state is
fed where the embeddings go (a hook on the embedding module) and the blocks below it are
left out of the view: valid when the first block receives the embedding output unchanged,
which is checked on the first batch stored (a model that transforms the embeddings inside
its ``forward`` is never reused; Gemma's scale lives in its embedding module, which is fine).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import weakref
from collections.abc import Callable, Iterator

import torch

from depthprune.model.decoder_layers import find_decoder_layers
from depthprune.model.masking import hidden_of, skip_layers

#: Ours: the dense states one model may keep (per process). A tiny model's whole evaluation fits
#: at every boundary it is asked for; an 8B model keeps what fits and recomputes the rest.
DENSE_STATE_BYTES = 1 << 30


class DenseStates:
    """Inputs of block ``b`` (b >= 1) of the dense model, per exact forward batch.

    ``states[key][b]``; filled first come, first kept, up to ``max_bytes``. ``usable`` is None
    until the first stored batch has checked that block 0 receives the embedding output as is,
    then True, or False for good (nothing stored or reused).
    """

    def __init__(self, max_bytes: int = DENSE_STATE_BYTES) -> None:
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self.usable: bool | None = None
        self.states: dict[bytes, dict[int, torch.Tensor]] = {}

    def add(self, key: bytes, boundary: int, state: torch.Tensor) -> bool:
        size = state.numel() * state.element_size()
        if self.usable is False or self.bytes + size > self.max_bytes:
            return False
        self.states.setdefault(key, {})[boundary] = state.detach().clone()
        self.bytes += size
        return True

    def clear(self) -> None:
        self.states.clear()
        self.bytes = 0

    @staticmethod
    def key(inputs: dict[str, torch.Tensor]) -> bytes:
        """A digest of every input tensor's name, shape, dtype and values."""
        h = hashlib.blake2b(digest_size=16)
        for name in sorted(inputs):
            t = inputs[name].detach().cpu().contiguous()
            h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
            h.update(t.numpy().tobytes())
        return h.digest()


_STORES: weakref.WeakKeyDictionary[torch.nn.Module, DenseStates] = weakref.WeakKeyDictionary()


def dense_states(model: torch.nn.Module, max_bytes: int = DENSE_STATE_BYTES) -> DenseStates:
    """The store that lives as long as ``model`` does (one per loaded model, shared by its views)."""
    store = _STORES.get(model)
    if store is None:
        store = _STORES[model] = DenseStates(max_bytes)
    return store


def forward_from_dense(model: torch.nn.Module, inputs: dict[str, torch.Tensor], dense_blocks: int,
                       store: DenseStates | None) -> tuple[torch.Tensor, int, int]:
    """The last hidden states of ``inputs`` through the decoder of ``model``'s current view.

    ``dense_blocks``: how many leading blocks of the view are the dense model's own first blocks
    (the first removed index; the block count when nothing is removed; 0: none claimed). Returns
    (hidden, block x token computations run, block x token computations taken from the store).
    """
    decoder = find_decoder_layers(model)
    n = len(decoder)
    tokens = int(inputs["input_ids"].numel())
    limit = min(dense_blocks, n - 1)
    if store is None or limit < 1 or store.usable is False:
        return _run(decoder.owner, inputs), n * tokens, 0
    key = DenseStates.key(inputs)
    have = store.states.get(key, {})
    start = max((b for b in have if b <= limit), default=0)
    wanted = [b for b in range(start + 1, limit + 1) if b not in have]
    with contextlib.ExitStack() as stack:
        if start:
            stack.enter_context(skip_layers(model, range(start)))
            stack.enter_context(_embeddings_replaced(model, have[start]))
        layers = find_decoder_layers(model).layers
        for b in wanted:  # block b's input (view position b - start) is a dense boundary: b <= dense_blocks
            stack.enter_context(_on_input(layers[b - start], functools.partial(store.add, key, b)))
        if store.usable is None and start == 0:
            stack.enter_context(_check_embeddings_feed_the_first_block(model, store))
        hidden = _run(decoder.owner, inputs)  # the view changes the block list, not its owner
    return hidden, (n - start) * tokens, start * tokens


def _run(owner: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    out = owner(**inputs, use_cache=False)
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else hidden_of(out)


@contextlib.contextmanager
def _embeddings_replaced(model: torch.nn.Module, state: torch.Tensor) -> Iterator[None]:
    handle = model.get_input_embeddings().register_forward_hook(lambda _m, _a, _out: state)
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def _check_embeddings_feed_the_first_block(model: torch.nn.Module, store: DenseStates) -> Iterator[None]:
    """The reuse feeds a state where the embeddings go: valid only if block 0 receives them as is."""
    seen: dict[str, torch.Tensor] = {}
    embed = model.get_input_embeddings().register_forward_hook(
        lambda _m, _a, out: seen.__setitem__("embed", out.detach().clone()))
    try:
        with _on_input(find_decoder_layers(model).layers[0], lambda h: seen.__setitem__("block0", h)):
            yield
    finally:
        embed.remove()
    e, h = seen.get("embed"), seen.get("block0")
    ok = e is not None and h is not None and e.shape == h.shape and bool(torch.equal(e.to(h.dtype), h))
    if not ok:
        store.clear()
    store.usable = ok


@contextlib.contextmanager
def _on_input(block: torch.nn.Module, fn: Callable[[torch.Tensor], object]) -> Iterator[None]:
    """Call ``fn(hidden_states)`` with the input of ``block`` each time it runs."""
    def hook(_module, args, kwargs):
        fn(args[0] if args else kwargs["hidden_states"])

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()
