"""The shapes that decide a decoder's FLOPs and memory: the registry's models whose weights are not
shipped (their depth from :data:`depthprune.models.MODELS`, the rest from each checkpoint's
``config.json``), else the model's local ``config.json``."""

from __future__ import annotations

from dataclasses import dataclass

from depthprune.models import MODELS, locate


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


def _registered(model: str, hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int, vocab: int,
                tied: bool, gguf: bool = False) -> ModelShape:
    """A registry model's shape: its depth and where its config comes from are the registry's
    (``gguf``: the config transformers reads from the model's GGUF weights file)."""
    spec = MODELS[model]
    if spec.n_layers is None:
        raise ValueError(f"{model}: the model registry has no layer count for it")
    source = (f"the config transformers reads from {spec.weights_file} ({spec.source})" if gguf
              else f"{spec.source} config.json")
    return ModelShape(model, spec.n_layers, hidden, intermediate, heads, kv_heads, head_dim, vocab, tied, source)


#: Shapes of the models whose weights are not shipped, from each checkpoint's config.json.
SHAPES: dict[str, ModelShape] = {
    s.model: s
    for s in (
        _registered("llama3-8b", 4096, 14336, 32, 8, 128, 128256, False),
        _registered("llama3.1-8b", 4096, 14336, 32, 8, 128, 128256, False),
        _registered("qwen3-8b", 4096, 12288, 32, 8, 128, 151936, False),
        _registered("smollm2-135m", 576, 1536, 9, 3, 64, 49152, True),
        # attention FLOPs counted as full attention (15 of its 18 blocks attend within 512 tokens)
        _registered("gemma3-270m", 640, 2048, 4, 1, 256, 262144, True, gguf=True),
    )
}


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

