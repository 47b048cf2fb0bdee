"""The shapes that decide a decoder's FLOPs and memory: the registry's models that state one (depth and
architecture from :data:`depthprune.model.MODELS`, :attr:`~depthprune.model.ModelSpec.shape`), else the
model's local ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass

from depthprune.model import MODELS, locate


@dataclass(frozen=True)
class ModelShape:
    """The shapes that decide a decoder's FLOPs and memory."""

    model: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    source: str

    @property
    def layer_params(self) -> int:
        attn = self.hidden * self.heads * self.head_dim * 2 + 2 * self.hidden * self.kv_heads * self.head_dim
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden  # SwiGLU MLP, two RMSNorms

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def layer_flops_per_token(self, seq_len: int) -> float:
        """One block, forward: 2 FLOPs per weight, plus QKᵀ and AV over a causal context
        (on average seq_len/2 keys: 2 matmuls x 2 FLOPs x seq_len/2 x heads x head_dim)."""
        return 2.0 * self.layer_params + 2.0 * seq_len * self.heads * self.head_dim

    @property
    def head_flops_per_token(self) -> float:
        return 2.0 * self.hidden * self.vocab


#: The registered models whose config the planner cites as the one transformers reads from the model's
#: GGUF weights file (the others: the checkpoint's config.json).
_GGUF_CONFIG = frozenset({"gemma3-270m"})


def _registered(model: str) -> ModelShape:
    """A registry model's shape: its depth, architecture and source are the registry's
    (for the models in :data:`_GGUF_CONFIG`, the config transformers reads from the GGUF weights file)."""
    spec = MODELS[model]
    if spec.n_layers is None or spec.shape is None:
        raise ValueError(f"{model}: the model registry has no layer count or shape for it")
    s = spec.shape
    source = (f"the config transformers reads from {spec.weights_file} ({spec.source})" if model in _GGUF_CONFIG
              else f"{spec.source} config.json")
    return ModelShape(model, spec.n_layers, s.hidden, s.intermediate, s.heads, s.kv_heads, s.head_dim, s.vocab,
                      s.tied, source)


#: Shapes of the registry's models that state one (:attr:`depthprune.model.ModelSpec.shape`); gemma3-270m's
#: attention FLOPs are counted as full attention (15 of its 18 blocks attend within 512 tokens).
SHAPES: dict[str, ModelShape] = {m: _registered(m) for m, spec in MODELS.items() if spec.shape is not None}


def model_shape(model: str) -> ModelShape:
    """The table's shape, else the one read from the model's local ``config.json`` (tiny family)."""
    if model in SHAPES:
        return SHAPES[model]
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(locate(model))
    config = getattr(config, "text_config", None) or config
    heads = int(config.num_attention_heads)
    return ModelShape(
        model, int(config.num_hidden_layers), int(config.hidden_size), int(config.intermediate_size), heads,
        int(getattr(config, "num_key_value_heads", None) or heads),
        int(getattr(config, "head_dim", None) or config.hidden_size // heads), int(config.vocab_size),
        bool(getattr(config, "tie_word_embeddings", False)), f"{locate(model)}/config.json")

