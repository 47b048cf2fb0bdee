"""Everything a plan assumes, its defaults, and the sentences printed with it."""

from __future__ import annotations

from dataclasses import dataclass

from depthprune.plan.gpus import GPU

# -- evaluation sizes ----------------------------------------------------------------------------

#: Paper-profile evaluation tasks: (documents, loglikelihood requests per document, tokens per
#: request). Documents: the split lm-eval scores (hellaswag/piqa/boolq/winogrande validation,
#: ARC test, lambada_openai test). Tokens per request (context + continuation, Llama-3 tokenizer)
#: are our rough guesses, not measured.
EVAL_TASKS: dict[str, tuple[int, int, int]] = {
    "hellaswag": (10042, 4, 110),
    "winogrande": (1267, 2, 30),
    "arc_easy": (2376, 4, 50),
    "arc_challenge": (1172, 4, 55),
    "piqa": (1838, 2, 60),
    "boolq": (3270, 2, 170),
    "lambada": (5153, 1, 80),
}
#: WikiText-2 (raw) test: ~287k tokens with GPT-2's tokenizer (the Hugging Face perplexity
#: guide); taken as the Llama-3/Qwen3 count too (not measured here).
WIKITEXT2_TEST_TOKENS = 287_000


# -- assumptions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assumptions:
    """Everything the plan assumes; printed with it. Defaults are ours unless a field says so."""

    gpu: str = "h100-80gb"
    gpus: int = 8
    mfu: float = 0.35  # model-FLOPs utilisation of the GPU's dense bf16 peak (ours; batch-8 inference)
    dtype_bytes: int = 2  # bf16 weights and hidden states (the paper grid's dtype)
    landscapes: int = 4  # synthetic loss landscapes each simulated searcher runs on
    margin_tokens_per_item: int = 160  # padded tokens per margin item, options packed after the prompt (guess)
    cuda_context_gib: float = 1.0  # CUDA context + allocator slack per process (ours)
    cache_fraction: float = 0.4  # scoring.scorer._default_cache_bytes on CUDA: 40 % of free memory
    keep_best: int = 4  # the Scorer's default keep_best (states kept per set size)
    measured: tuple[str, ...] = ()  # result directories whose prefix-cache ratios replace the bo bound
    #: a heal's training tokens at the peers' budget: Shortened LLaMA / LLM-Pruner's 2 epochs of Alpaca-cleaned's
    #: 51,760 samples at their 256-token cutoff, ~180 tokens a sample (ours, from the dataset's length statistics)
    heal_tokens: int = 19_000_000


def assumption_lines(a: Assumptions, gpu: GPU) -> list[str]:
    """Every assumption of a plan, one sentence each."""
    return [
        f"GPU: {a.gpus} x {gpu.name}, {gpu.bf16_tflops:g} TFLOP/s dense bf16 peak ({gpu.source}), "
        f"{gpu.memory_gib:g} GiB; one worker (one model loaded) per GPU.",
        f"Throughput: {a.mfu:.0%} of that peak on every forward and backward (--mfu); model loading, "
        "tokenisation, lm-eval's bookkeeping and GP fits (bo) are not counted.",
        "FLOPs per token and block: 2 x block weights + causal attention (2 x seq_len x heads x head_dim); "
        "the output head (2 x hidden x vocab) once per token of every evaluated set; a backward pass "
        "(cbo's gate gradients, weights frozen) costs as much as its forward.",
        "Layer-forwards as results count them (scoring.request_cost.replay_cost: as if alone, the prior charged, the prefix "
        "cache's byte budget not binding). 'bound' = every set run from the embeddings (needs no losses).",
        f"Expected layer-forwards: the searcher's own code run on {a.landscapes} synthetic loss landscapes "
        "(U-shaped single-removal losses with noise, adjacent removals interact); bo is not simulated: "
        "its bound, times the prefix-cache ratio of measured bo results when --measured gives any.",
        f"Tokens: ppl/kl = windows x seq_len; margin = items x {a.margin_tokens_per_item} padded tokens "
        "(--margin-tokens, a guess; a measured result's tokens_per_pass replaces it).",
        f"Evaluation (paper profile): WikiText-2 test ~{WIKITEXT2_TEST_TOKENS // 1000}k tokens, C4 windows x "
        "seq_len, lm-eval documents x requests x tokens per request (EVAL_TASKS, tokens guessed); every cell "
        "evaluated once plus the dense model once per model (the evaluation cache is not credited).",
        f"Memory per worker: weights (params x {a.dtype_bytes} B) + the prefix cache at its budget "
        f"(scoring.scorer._default_cache_bytes: {a.cache_fraction:.0%} of the memory free after loading; the kept states, "
        f"the dense ones and {a.keep_best} sets of each size at every boundary, are its demand, and other sets' "
        "states fill the rest as spares) + the largest of: a search run's captured states "
        "(capped by the same budget: a run captures before the cache trims) and one micro-batch's block and "
        "2048-token head activations; an evaluation batch through a block and one 2048-token head chunk (the head "
        "is chunked); cbo's gate-gradient backward (blocks and head chunks recomputed in the backward: two "
        "boundary states per block for one micro-batch, one block's activations, one head chunk of at most "
        "model.output_head.GRAD_CHUNK_BYTES of float32 logits) + "
        f"{a.cuda_context_gib:g} GiB CUDA context.",
        "Grid-run totals share the dense pass and the prior per model and objective (cells report them as "
        "if alone); sets re-used between a condition's searches are not subtracted (an upper bound).",
        "Wall clock: tasks (a model's or a model and objective's cells) placed longest-first on the GPUs.",
        f"Healing (optional, counted apart): every cell's set and each model's dense control healed once with LoRA "
        f"at the peers' budget, {a.heal_tokens / 1e6:.0f} M tokens (Shortened LLaMA / LLM-Pruner: 2 epochs of "
        "Alpaca-cleaned; --heal-tokens); per token each kept block one forward and one backward and the head "
        "likewise (a backward counted as twice a forward, as the plan counts one; LoRA's frozen weights need no "
        "weight gradient, so this bounds it); cells sharing a set are not credited.",
    ]
