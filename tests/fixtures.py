"""Random tiny models of several architectures, with a character tokenizer, for unit tests.

These exist to test mechanisms (masking, scoring, saving) on architectures the shipped
tiny family does not cover; results on them are noise by design.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # transformers is imported where it is used: pytest's controller loads this file with the
    # conftests, and importing transformers there (~3.5 s) delayed every xdist worker's start
    from transformers import PreTrainedTokenizerFast

ALPHABET = string.ascii_lowercase + " .,\n"
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def char_tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(ALPHABET))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>")


def config_for(arch: str, n_layers: int = 6, vocab_size: int = len(SPECIALS) + len(ALPHABET)):
    from transformers import LlamaConfig, MistralConfig, Qwen3Config

    kw = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if arch == "llama":
        return LlamaConfig(**kw)
    if arch == "qwen3":
        # half sliding-window layers: exercises per-layer config lists (layer_types)
        return Qwen3Config(**kw, head_dim=8, use_sliding_window=True, sliding_window=16,
                           max_window_layers=n_layers // 2)
    if arch == "mistral":
        return MistralConfig(**kw, sliding_window=16)
    raise ValueError(arch)


def random_model(arch: str, n_layers: int = 6, seed: int = 0):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config_for(arch, n_layers), attn_implementation="sdpa").eval()


def random_text(n_docs: int, words: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        ws = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 7))) for _ in range(words)]
        docs.append(" ".join(ws) + ".")
    return docs


def write_model_dir(path: Path, arch: str = "llama", n_layers: int = 6, seed: int = 0) -> Path:
    model = random_model(arch, n_layers, seed)
    model.save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return path


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def stored_identity(**fields: object) -> dict:
    """A complete stored ``identity`` (:class:`depthprune.results.schema.Identity`), ``fields`` set, the rest made up."""
    from depthprune.results.schema import Identity

    made_up = dict(grid="t", model="m", weights="sha256:test", profile="tiny", objective="ppl", dataset="d",
                   answer=None, calibration_seed=0, search="greedy", variant="default", budget=1, search_seed=0,
                   stand_in=False)
    return Identity(**{**made_up, **fields}).to_dict()  # type: ignore[arg-type]


def result_v2(model: str, objective: str, search: str, removed: list[int], loss: float, *, budget: int = 3,
              n_layers: int = 12, evaluations: int = 10, metrics: dict | None = None, grid: str = "t",
              seed: int = 0, variant: str = "default") -> dict:
    """A constructed cell result in the current schema, as :func:`depthprune.results.schema.read_result` returns it."""
    from depthprune.results.schema import SCHEMA, Identity, validate

    ident = Identity(grid=grid, model=model, weights="sha256:test", profile="tiny", objective=objective,
                     dataset="d", answer=None, calibration_seed=0, search=search, variant=variant, budget=budget,
                     search_seed=seed, stand_in=False)
    variant_id = f".{variant}" if variant != "default" else ""
    stored = {
        "schema": SCHEMA, "cell": f"{model}-{objective}-{search}{variant_id}-M{budget}", "identity": ident.to_dict(),
        "n_layers": n_layers, "removed": list(removed), "calibration_loss": loss, "dense_calibration_loss": loss - 0.5,
        "evaluated": metrics is not None, "metrics": metrics or {}, "objective_params": {"seed": 0},
        "cost": {"evaluations": evaluations, "layer_forwards": 5 * evaluations, "layer_backwards": 0,
                 "seconds": 0.2, "search_seconds": 0.1},
        "environment": {"device": "cpu", "dtype": "torch.float32", "packages": {"torch": "x"}, "git_revision": "abc"},
        "fingerprint": "f", "settings": {},
    }
    return validate(stored, "constructed")
