"""Stand-in checkpoints for the paper's three models, built by code under their real ids.

A stand-in has what the paper path can trip on and nothing it cannot afford on a CPU:

* the real model's ``config.json`` **as the Hub file writes it** (the transformers 4.4x/4.5x
  format: ``rope_scaling`` / ``rope_theta`` / ``torch_dtype``, not the format this
  transformers would save), with only the width changed: layer count (32 / 32 / 36), GQA ratio
  (4 query heads per key/value head), LLaMA-3.1's ``rope_scaling`` of type ``llama3``,
  Qwen3's q/k norm (``Qwen3ForCausalLM``), untied embeddings (all three 8B models), the real
  vocabulary size (128256 / 151936) and the real special-token ids;
* weights in bf16 safetensors, **sharded** with an index file as the real checkpoints are, random
  (``initializer_range`` 0.02, seeded): accuracies sit at chance, which the rehearsal never
  checks; it checks invariants;
* a byte-level BPE tokenizer trained here on the stand-in text (:func:`train_bpe`), wrapped with
  the real tokenizer's behaviour: LLaMA-3 prepends ``<|begin_of_text|>`` (id 128000) and has
  **no pad token**; Qwen3 adds **no BOS**, ends with ``<|im_end|>`` (151645) and pads with
  ``<|endoftext|>`` (151643). Its own vocabulary is small (ours: 8192 entries); the ids up to
  the special tokens are filled with entries no text can produce, so the special tokens sit at
  their real ids and ``len(tokenizer)`` is the real one (128256 / 151669; Qwen3's embedding has
  151936 rows, more than its tokenizer, as in the real model);
* the marker file :data:`depthprune.model.files.STAND_IN_MARKER`, so every result made on it is
  flagged ``stand_in`` and never taken for a real one.

Width (ours): hidden 64, 8 query / 2 key-value heads of 8 dimensions (the real ratio 32/8 = 4;
8 rotary dimensions still span all three bands of LLaMA-3.1's frequency scaling),
intermediate 3.5x hidden (LLaMA-3: 14336/4096) or 3x (Qwen3: 12288/4096). The real vocabulary
is kept although the output head then dominates the compute (64 x 128256 per token against
~0.05M per block): it is the size that decides logits memory and the head's chunking, which a
smaller vocabulary would hide. Two layouts: the Hugging Face hub cache (``models--org--name/``
with ``refs/main``, ``snapshots/<rev>/`` linking into ``blobs/<sha256>``, found by
``huggingface_hub.snapshot_download(local_files_only=True)``), or ``DEPTHPRUNE_MODELS_DIR/<id>/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from depthprune.common.jsonio import write_json
from depthprune.model import PAPER_MODELS, STAND_IN_MARKER

Layout = Literal["hf-cache", "models-dir"]
LAYOUTS: tuple[str, ...] = ("hf-cache", "models-dir")

#: our width (see the module docstring)
HIDDEN = 64
HEADS, KV_HEADS, HEAD_DIM = 8, 2, 8
BPE_VOCAB = 8192  # the stand-in tokenizer's own entries (ours); specials sit at the real ids above them
FILLER = "\u2400"  # prefix of the unreachable entries between the two (see tokenizer_json)
SHARD_SIZE = "16MB"  # several shards with an index, as the real checkpoints have



def _hub_shape(model_id: str, head_dim: bool = False) -> dict[str, Any]:
    """The registry's shape of a paper model (:attr:`depthprune.model.ModelSpec.shape`) under its
    config.json keys (``head_dim``: only where the Hub file names it)."""
    spec = PAPER_MODELS[model_id]
    if spec.n_layers is None or spec.shape is None:
        raise ValueError(f"{model_id}: the model registry has no layer count or shape for it")
    s = spec.shape
    return {"hidden_size": s.hidden, "intermediate_size": s.intermediate, "num_attention_heads": s.heads,
            "num_hidden_layers": spec.n_layers, "num_key_value_heads": s.kv_heads, "tie_word_embeddings": s.tied,
            "vocab_size": s.vocab, **({"head_dim": s.head_dim} if head_dim else {})}


_L3, _Q3 = _hub_shape("llama3-8b"), _hub_shape("qwen3-8b", head_dim=True)
# The real config.json files as published on the Hub (meta-llama/Meta-Llama-3-8B,
# meta-llama/Llama-3.1-8B, Qwen/Qwen3-8B), in their key order, the shape's numbers the registry's;
# only the width keys are replaced by :func:`stand_in_config`.
_LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu",
    "hidden_size": _L3["hidden_size"], "initializer_range": 0.02, "intermediate_size": _L3["intermediate_size"],
    "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": _L3["num_attention_heads"],
    "num_hidden_layers": _L3["num_hidden_layers"], "num_key_value_heads": _L3["num_key_value_heads"],
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0,
    "tie_word_embeddings": _L3["tie_word_embeddings"], "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0", "use_cache": True, "vocab_size": _L3["vocab_size"],
}
_LLAMA31_8B: dict[str, Any] = {
    **_LLAMA3_8B, **_hub_shape("llama3.1-8b"), "max_position_embeddings": 131072, "mlp_bias": False,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "transformers_version": "4.43.0.dev0",
}
_QWEN3_8B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": _Q3["head_dim"],
    "hidden_act": "silu", "hidden_size": _Q3["hidden_size"], "initializer_range": 0.02,
    "intermediate_size": _Q3["intermediate_size"], "max_position_embeddings": 40960, "max_window_layers": 36,
    "model_type": "qwen3", "num_attention_heads": _Q3["num_attention_heads"],
    "num_hidden_layers": _Q3["num_hidden_layers"], "num_key_value_heads": _Q3["num_key_value_heads"],
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": _Q3["tie_word_embeddings"], "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": _Q3["vocab_size"],
}

_LLAMA3_SPECIALS = (["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                     "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                     "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
                    + [f"<|reserved_special_token_{i}|>" for i in range(3, 248)])
_QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                   "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                   "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
                   "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                   "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
# The real pre-tokenizer patterns: LLaMA-3 groups digits by up to three, Qwen splits every digit.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class TokenizerSpec:
    """How the real tokenizer frames text (ids are the real ones)."""

    specials: list[str]
    first_special_id: int
    split_pattern: str
    bos: str | None  # prepended to every encoded text (None: no BOS, as Qwen3)
    eos: str
    pad: str | None  # None: the real tokenizer has no pad token (LLaMA-3)
    model_max_length: int


@dataclass(frozen=True)
class StandInSpec:
    """One paper model's stand-in: its registry id, the real config and tokenizer, the seed of its weights."""

    id: str
    real_config: dict[str, Any]
    tokenizer: TokenizerSpec
    seed: int

    @property
    def intermediate_ratio(self) -> float:
        """The real model's MLP width over its hidden size (kept by our width)."""
        return float(self.real_config["intermediate_size"] / self.real_config["hidden_size"])


_LLAMA3_TOKENIZER = TokenizerSpec(_LLAMA3_SPECIALS, 128000, _LLAMA3_SPLIT, "<|begin_of_text|>", "<|end_of_text|>",
                                  None, 1000000000000000019884624838656)
STAND_INS: dict[str, StandInSpec] = {
    s.id: s
    for s in (
        StandInSpec("llama3-8b", _LLAMA3_8B, _LLAMA3_TOKENIZER, 11),
        StandInSpec("llama3.1-8b", _LLAMA31_8B, _LLAMA3_TOKENIZER, 12),
        StandInSpec("qwen3-8b", _QWEN3_8B,
                    TokenizerSpec(_QWEN3_SPECIALS, 151643, _QWEN_SPLIT, None, "<|im_end|>", "<|endoftext|>", 131072),
                    13),
    )
}


def stand_in_config(spec: StandInSpec) -> dict[str, Any]:
    """The real config.json with our width (every other key, and the key format, kept)."""
    cfg = dict(spec.real_config)
    cfg.update(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
               intermediate_size=int(round(HIDDEN * spec.intermediate_ratio)))
    if "head_dim" in cfg:  # Qwen3 names it; LLaMA derives hidden / heads (= HEAD_DIM as well)
        cfg["head_dim"] = HEAD_DIM
    assert HIDDEN // HEADS == HEAD_DIM
    return cfg


# -- tokenizer ---------------------------------------------------------------------------------


def train_bpe(texts: Iterable[str], vocab_size: int = BPE_VOCAB) -> tuple[dict[str, int], list[str]]:
    """A byte-level BPE (vocab, merges) trained on ``texts``; deterministic for the same texts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return model["vocab"], merges


def tokenizer_json(spec: TokenizerSpec, vocab: dict[str, int], merges: list[str]) -> dict[str, Any]:
    """A ``tokenizer.json`` in the real one's shape: BPE model with its own ids, the special tokens
    as added tokens at their real ids, the real split pattern, BOS (or none) by the post-processor."""
    if max(vocab.values()) >= spec.first_special_id:
        raise ValueError(f"BPE vocabulary of {len(vocab)} overlaps the special ids from {spec.first_special_id}")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ValueError("BPE vocabulary ids must be 0..n-1")
    # Fill the ids up to the first special token: transformers re-numbers added tokens that do not
    # follow the model's vocabulary (the specials would get ids 8192.. while the post-processor
    # still writes 128000). A filler holds U+2400, which no byte-level pre-token contains, so no
    # text ever encodes to one; len(tokenizer) is then the real one (128256 / 151669).
    vocab = {**vocab, **{f"{FILLER}{i}": i for i in range(len(vocab), spec.first_special_id)}}
    added = [{"id": spec.first_special_id + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(spec.specials)]
    ids = {a["content"]: a["id"] for a in added}
    if spec.bos is not None:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": spec.bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": spec.bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": spec.bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {spec.bos: {"id": spec.bos, "ids": [ids[spec.bos]], "tokens": [spec.bos]}}}
    else:
        post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": spec.split_pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }


def tokenizer_config(spec: TokenizerSpec, tok_json: dict[str, Any]) -> dict[str, Any]:
    """``tokenizer_config.json``: the real special-token roles (no pad for LLaMA-3, no BOS for Qwen3)."""
    decoder = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
               for a in tok_json["added_tokens"]}
    return {"added_tokens_decoder": decoder, "bos_token": spec.bos, "eos_token": spec.eos, "pad_token": spec.pad,
            "clean_up_tokenization_spaces": False, "model_max_length": spec.model_max_length,
            "tokenizer_class": "PreTrainedTokenizerFast"}


# -- checkpoint --------------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    write_json(path, data, sort_keys=False)


def write_checkpoint(spec: StandInSpec, out: Path, vocab: dict[str, int], merges: list[str]) -> dict[str, Any]:
    """Write one stand-in into ``out`` (a plain checkpoint directory); returns its marker."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    cfg_dict = stand_in_config(spec)
    config = AutoConfig.for_model(**{k: v for k, v in cfg_dict.items() if k not in ("architectures",
                                                                                     "transformers_version")})
    config.architectures = list(cfg_dict["architectures"])
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.to(torch.bfloat16)
    model.save_pretrained(out, max_shard_size=SHARD_SIZE)
    _write_json(out / "config.json", cfg_dict)  # the real file's format, not this transformers' re-serialisation
    tok_json = tokenizer_json(spec.tokenizer, vocab, merges)
    _write_json(out / "tokenizer.json", tok_json)
    _write_json(out / "tokenizer_config.json", tokenizer_config(spec.tokenizer, tok_json))
    _write_json(out / "special_tokens_map.json",
                {k: v for k, v in (("bos_token", spec.tokenizer.bos), ("eos_token", spec.tokenizer.eos),
                                   ("pad_token", spec.tokenizer.pad)) if v is not None})
    n_params = sum(p.numel() for p in model.parameters())
    marker = {
        "stand_in_for": PAPER_MODELS[spec.id].source, "id": spec.id, "built_by": "depthprune.rehearsal",
        "weights": f"random, seed {spec.seed}, initializer_range {cfg_dict['initializer_range']}, bf16",
        "width": {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
                  "head_dim": HEAD_DIM, "intermediate_size": cfg_dict["intermediate_size"]},
        "kept_from_real": ["num_hidden_layers", "GQA ratio", "rope_theta", "rope_scaling", "vocab_size",
                           "tie_word_embeddings", "special token ids", "architecture class"],
        "tokenizer": f"byte-level BPE, {len(vocab)} entries trained on the rehearsal text; real special ids",
        "parameters": n_params,
        "never": "a real result: results made on this checkpoint carry identity.stand_in = true",
    }
    _write_json(out / STAND_IN_MARKER, marker)
    return marker


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_hub_snapshot(hub_cache: Path, repo_id: str, files: dict[str, Path], repo_type: str = "model") -> Path:
    """Copy ``files`` (path in repo -> local file) into the Hub cache's layout; returns the snapshot.

    As ``huggingface_hub`` writes it: large files (weights, data shards) become blobs named by
    their sha256 (Git LFS object ids), others by their git blob sha1; the snapshot links to them;
    ``refs/main`` names the revision (here a hash of the contents).
    """
    repo = hub_cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    contents = {name: path.read_bytes() for name, path in sorted(files.items())}
    revision = hashlib.sha1("".join(f"{n}:{_git_blob_sha1(d)}" for n, d in contents.items()).encode()).hexdigest()
    if repo.exists():
        shutil.rmtree(repo)
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    for name, data in contents.items():
        is_lfs = name.endswith((".safetensors", ".bin", ".gz", ".parquet"))
        blob = repo / "blobs" / (hashlib.sha256(data).hexdigest() if is_lfs else _git_blob_sha1(data))
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot


def to_hub_cache(checkpoint: Path, hub_cache: Path, repo_id: str) -> Path:
    """Move a checkpoint directory into the Hub cache's layout; returns the snapshot directory."""
    snapshot = write_hub_snapshot(hub_cache, repo_id, {p.name: p for p in checkpoint.iterdir() if p.is_file()})
    shutil.rmtree(checkpoint)
    return snapshot


def build_models(out: Path, texts: Iterable[str], layout: Layout = "hf-cache",
                 models: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Build every stand-in (or those named) under ``out``; returns id -> {path, marker}.

    ``hf-cache``: into ``out/hf/hub`` (point ``HF_HOME`` at ``out/hf``); ``models-dir``: into
    ``out/models/<id>`` (point ``DEPTHPRUNE_MODELS_DIR`` at ``out/models``).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; allowed: {', '.join(LAYOUTS)}")
    vocab, merges = train_bpe(texts)
    built = {}
    for model_id in models or STAND_INS:
        if model_id not in STAND_INS:
            raise ValueError(f"no stand-in for {model_id!r}; allowed: {', '.join(STAND_INS)}")
        spec = STAND_INS[model_id]
        if layout == "models-dir":
            path = out / "models" / model_id
            if path.exists():
                shutil.rmtree(path)
            marker = write_checkpoint(spec, path, vocab, merges)
        else:
            staging = out / "staging" / model_id
            if staging.exists():
                shutil.rmtree(staging)
            marker = write_checkpoint(spec, staging, vocab, merges)
            path = to_hub_cache(staging, out / "hf" / "hub", PAPER_MODELS[model_id].source)
        built[model_id] = {"path": str(path), "marker": marker}
    shutil.rmtree(out / "staging", ignore_errors=True)
    return built
