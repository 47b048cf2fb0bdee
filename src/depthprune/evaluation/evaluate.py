"""Evaluate a (pruned) model: the perplexity suite and lm-eval zero-shot tasks.

Everything runs on the model *in memory* through the reversible view
(:func:`depthprune.model.masking.skip_layers`), so evaluating many removal sets needs one
load. Zero-shot tasks go through lm-evaluation-harness (its tasks, requests and metrics; its
prompt templates compiled once per evaluation, :mod:`depthprune.evaluation.templates`, the same
prompts) with one of two lm-eval models, ``EvalConfig.adapter``: ``"shared-prefix"``
(ours, the default: :class:`depthprune.evaluation.lm_adapter.SharedPrefixLM`, lm-eval's ``HFLM`` that
computes a context shared by several continuations once and runs the output head only where
lm-eval reads it; equal to stock within float rounding, tested) or ``"hflm"`` (stock
``HFLM(pretrained=model, tokenizer=...)``). The tiny family's six stand-in tasks (and
the LAMBADA stand-in) are local YAML tasks loaded with
``TaskManager(include_path=..., include_defaults=False)``.

Perplexities never hold a batch's full-vocabulary logits: the output head runs on a chunk
of positions at a time (:func:`windows_perplexity`).

Metrics are flat, named after the paper's tasks whatever the profile:
``wikitext2_ppl``, ``c4_ppl``, ``lambada_ppl``, ``lambada_acc``, ``<task>_acc``,
``<task>_acc_norm``, and ``avg_acc`` = the mean headline metric over the evaluated tasks
(the paper's six: acc_norm for hellaswag and arc_challenge, acc otherwise; a profile with
tasks of its own names them and their headline metrics, :class:`~depthprune.data.profiles.Profile`).
Results are cached on disk by (model, removed set, tasks, protocol), so two searchers that
find the same set are evaluated once.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from depthprune.common.jsonio import JSONFileError, canonical, read_json, write_json_atomic
from depthprune.data.protocol import EvalConfig
from depthprune.data.sources import eval_windows, load_texts
from depthprune.model.decoder_layers import find_decoder_layers
from depthprune.model.masking import skip_layers
from depthprune.model.output_head import OutputHead
from depthprune.results.provenance import code_fingerprint, library_versions, package_versions

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.data.profiles import Profile

@dataclass
class EvalResult:
    metrics: dict[str, float]
    protocol: dict[str, Any]
    seconds: float
    cached: bool = False
    #: per-item outcomes: task -> metric (acc, acc_norm) -> "0110..." in lm-eval's doc order,
    #: so that two solutions can be compared item by item (paired tests, not 2 x stderr)
    items: dict[str, dict[str, str]] = field(default_factory=dict)
    #: task -> each item's cluster (the source unit its items share, from the task's ``cluster`` field;
    #: numbered by first appearance, doc order), so resampling keeps dependent items together
    clusters: dict[str, list[int]] = field(default_factory=dict)
    #: perplexity dataset -> each window's mean NLL (nats per token), window order
    windows: dict[str, list[float]] = field(default_factory=dict)


# -- perplexity ------------------------------------------------------------------------------


def windows_perplexity(model, windows: torch.Tensor, batch_size: int,
                       chunk_tokens: int | None = None, dense_blocks: int = 0,
                       window_nll: list[float] | None = None) -> tuple[float, int]:
    """Token-weighted perplexity of ``windows`` [n, T]: every predicted token counts once.

    ``window_nll``, when given, receives each window's mean NLL (nats per predicted token), in
    window order: the per-window outcomes from which a verdict estimates the evaluation's own
    noise (:mod:`depthprune.report.noise`); their mean is the log of the perplexity returned.

    The blocks run on a batch; the output head runs on ``chunk_tokens`` positions at a time
    (default: :class:`~depthprune.model.output_head.OutputHead`'s, 2048), so the largest logits
    tensor is chunk x vocabulary whatever the batch and window (a whole batch of 8 x 2048
    tokens at a 128k vocabulary would be 8.4 GB in float32). The head is checked once against
    the model's own logits; an architecture it does not reproduce falls back, with a warning,
    to the model's full logits. ``dense_blocks``: leading blocks of the view that are the dense
    model's (:mod:`depthprune.scoring.dense_states`: their outputs are taken from the model's store where
    an earlier evaluation of the same windows left them).
    """
    from depthprune.scoring.dense_states import dense_states, forward_from_dense

    device = next(model.parameters()).device
    decoder = find_decoder_layers(model)
    head = OutputHead(model) if chunk_tokens is None else OutputHead(model, chunk_tokens=chunk_tokens)
    nll, count = 0.0, 0
    with torch.no_grad():
        probe = windows[:1, : min(64, head.chunk_tokens)].to(device)
        chunked = _head_reproduces_logits(model, decoder.owner, head, probe)
        store = dense_states(model) if dense_blocks else None
        for start in range(0, windows.shape[0], batch_size):
            ids = windows[start : start + batch_size].to(device)
            targets = ids[:, 1:]
            if chunked:
                hidden, _, _ = forward_from_dense(model, {"input_ids": ids}, dense_blocks, store)
                logp = head.target_logprobs(hidden[:, :-1].reshape(-1, hidden.shape[-1]), targets.reshape(-1))
                rows = -logp.double().reshape(targets.shape).sum(dim=1)
            else:
                logits = model(input_ids=ids, use_cache=False).logits[:, :-1].float()
                rows = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
                ).double().reshape(targets.shape).sum(dim=1)
            nll += rows.sum().item()
            if window_nll is not None:
                window_nll.extend((rows / targets.shape[1]).tolist())
            count += targets.numel()
    return math.exp(nll / count), count


def _head_reproduces_logits(model, owner, head, ids: torch.Tensor) -> bool:
    """Does final hidden state -> ``head`` give the model's own logits (on a few tokens)?"""
    ref = model(input_ids=ids, use_cache=False).logits.float()
    out = owner(input_ids=ids, use_cache=False)
    mine = head.logits(out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0])
    tol = 1e-4 if ref.dtype == torch.float32 and next(model.parameters()).dtype == torch.float32 else 5e-2
    if torch.allclose(ref, mine, rtol=0, atol=tol * max(1.0, ref.abs().max().item())):
        return True
    warnings.warn(f"{type(model).__name__}: the output head does not reproduce the model's logits "
                  f"(max diff {(ref - mine).abs().max().item():.3g}); perplexity uses full logits per batch",
                  stacklevel=3)
    return False


@lru_cache(maxsize=8)
def _ppl_windows(name: str, profile: Profile, tokenizer, seq_len: int, c4_windows: int):
    """Evaluation windows of one dataset (cached per process: tokenising WikiText takes a while)."""
    joiner = "\n\n" if name == "wikitext2" else " "  # WikiText-2: "\n\n"; C4 (GPTQ): " "
    source = profile.source("wikitext2" if name == "wikitext2" else "c4_validation")
    max_windows = None if name == "wikitext2" else c4_windows
    windows, protocol = eval_windows(load_texts(source), tokenizer, seq_len, joiner=joiner, max_windows=max_windows)
    return windows, {"source": source.describe(), **asdict(protocol)}


def perplexity_suite(model, tokenizer, profile: Profile, cfg: EvalConfig, dense_blocks: int = 0
                     ) -> tuple[dict[str, float], dict[str, Any], dict[str, list[float]]]:
    """Perplexity on each of ``cfg.perplexity``'s datasets: metrics, protocol, per-window mean NLLs."""
    metrics: dict[str, float] = {}
    protocol: dict[str, Any] = {}
    per_window: dict[str, list[float]] = {}
    for name in cfg.perplexity:
        windows, proto = _ppl_windows(name, profile, tokenizer, cfg.seq_len, cfg.c4_windows)
        per_window[name] = []
        metrics[f"{name}_ppl"], tokens = windows_perplexity(model, windows, cfg.batch_size,
                                                            dense_blocks=dense_blocks, window_nll=per_window[name])
        protocol[name] = {**proto, "predicted_tokens": tokens}
    return metrics, protocol, per_window


# -- lm-eval ---------------------------------------------------------------------------------


ITEM_METRICS = ("acc", "acc_norm")


def item_clusters(samples: list[dict[str, Any]]) -> list[int] | None:
    """Each logged sample's ``doc["cluster"]`` ordered by doc_id, numbered by first appearance
    (None when the task's documents carry no cluster: then every item is its own)."""
    ordered = sorted(samples, key=lambda s: s["doc_id"])
    names = [(s.get("doc") or {}).get("cluster") for s in ordered]
    if not names or any(n is None for n in names):
        return None
    index: dict[Any, int] = {}
    return [index.setdefault(n, len(index)) for n in names]


def item_outcomes(samples: list[dict[str, Any]]) -> dict[str, str]:
    """lm-eval's logged samples of one task -> metric -> "0110..." ordered by doc_id."""
    ordered = sorted(samples, key=lambda s: s["doc_id"])
    out = {}
    for metric in ITEM_METRICS:
        values: list[Any] = [s.get(metric) for s in ordered]
        if values and all(isinstance(v, (int, float)) and v in (0, 1) for v in values):
            out[metric] = "".join(str(int(v)) for v in values)
    return out


def lm_eval_model(model, tokenizer, cfg: EvalConfig, dense_blocks: int = 0):
    """The lm-eval model :func:`zero_shot` runs: ``cfg.adapter``, built with the same arguments either way
    (``dense_blocks``: leading blocks of the view that are the dense model's, for the shared-prefix
    adapter's reuse of dense states; stock HFLM ignores it)."""
    kwargs: dict[str, Any] = {"pretrained": model, "tokenizer": tokenizer, "batch_size": cfg.batch_size,
                              "max_length": getattr(model.config, "max_position_embeddings", None)}
    if cfg.adapter == "hflm":
        from lm_eval.models.huggingface import HFLM

        return HFLM(**kwargs)
    from depthprune.evaluation.lm_adapter import SharedPrefixLM

    return SharedPrefixLM(**kwargs, dense_blocks=dense_blocks)


def lm_eval_tasks(profile: Profile, cfg: EvalConfig) -> dict[str, str]:
    """lm-eval task name -> the paper's task name, for the tasks ``cfg`` asks for (LAMBADA included)."""
    names = {profile.lm_eval_task(t): t for t in cfg.tasks}
    if cfg.lambada:
        names[profile.lm_eval_task("lambada")] = "lambada"
    return names


def run_lm_eval(lm, profile: Profile, cfg: EvalConfig, samples: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """lm-eval's ``simple_evaluate`` on ``lm`` with this evaluation's tasks, limit and logged samples
    (``samples``: lm-eval task -> the item indices to run instead of the limit, as verification does)."""
    from lm_eval import simple_evaluate

    from depthprune.evaluation.env_report import env_report_once
    from depthprune.evaluation.templates import compiled_templates

    logging.getLogger("lm-eval").setLevel(logging.WARNING)
    # each prompt template compiled once, not once per document (the same prompts); lm-eval's environment report
    # made once per process, not once per evaluation (the same report)
    with compiled_templates(), env_report_once():
        tasks = list(samples) if samples is not None else list(lm_eval_tasks(profile, cfg))
        return simple_evaluate(model=lm, tasks=tasks, task_manager=profile.task_manager(tasks),
                               limit=cfg.limit if samples is None else None, samples=samples, log_samples=True,
                               bootstrap_iters=1000 if samples is None else 0, verbosity="WARNING")


def zero_shot(model, tokenizer, profile: Profile, cfg: EvalConfig,
              dense_blocks: int = 0) -> tuple[dict[str, float], dict[str, Any], dict[str, dict[str, str]],
                                              dict[str, list[int]]]:
    """lm-eval on the in-memory model: flat metrics, what lm-eval reported, per-item outcomes, item clusters."""
    names = lm_eval_tasks(profile, cfg)
    if not names:
        return {}, {}, {}, {}
    lm = lm_eval_model(model, tokenizer, cfg, dense_blocks)
    out = run_lm_eval(lm, profile, cfg)
    metrics: dict[str, float] = {}
    for lm_name, task in names.items():
        res = out["results"][lm_name]
        for key, value in res.items():
            metric, _, _filter = key.partition(",")
            if metric in ("acc", "acc_norm", "perplexity", "acc_stderr", "acc_norm_stderr") and isinstance(
                value, (int, float)
            ):
                short = "ppl" if metric == "perplexity" else metric
                metrics[f"{task}_{short}"] = float(value)
    heads = [metrics.get(f"{t}_{profile.headline_metric(t)}") for t in cfg.tasks]
    present = [h for h in heads if h is not None]
    if cfg.tasks and len(present) == len(heads):
        metrics["avg_acc"] = sum(present) / len(heads)
    info = {
        "lm_eval_version": package_versions().get("lm_eval"),
        "tasks": {name: {"version": out.get("versions", {}).get(name), "n_samples": out.get("n-samples", {}).get(name)}
                  for name in names},
        "headline_metric": {t: profile.headline_metric(t) for t in cfg.tasks},
        "limit": cfg.limit,
        "adapter": {"name": cfg.adapter, **(asdict(lm.stats) if hasattr(lm, "stats") else {})},
    }
    samples = out.get("samples") or {}
    items = {task: item_outcomes(samples[lm_name]) for lm_name, task in names.items() if lm_name in samples}
    clusters = {task: c for lm_name, task in names.items() if lm_name in samples
                and (c := item_clusters(samples[lm_name])) is not None}
    return metrics, info, items, clusters


# -- the whole evaluation, cached ------------------------------------------------------------


def cache_key(model_id: str, weights: str, removed: Iterable[int], profile: Profile, cfg: EvalConfig,
              dtype: str) -> str:
    """The evaluation cache key: model *weights* (not just the id), removed set, profile,
    settings, dtype, the result-affecting code and the library versions — an entry made by
    older code or another lm-eval is never returned."""
    blob = canonical({"model": model_id, "weights": weights, "removed": sorted(removed), "profile": profile.name,
                      "cfg": asdict(cfg), "dtype": dtype, "code": code_fingerprint(), "libraries": library_versions()})
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def default_cache_dir() -> Path:
    return Path(os.environ.get("DEPTHPRUNE_CACHE", Path.home() / ".cache" / "depthprune")) / "eval"


def evaluate(
    model,
    tokenizer,
    model_id: str,
    removed: Sequence[int],
    profile: Profile,
    cfg: EvalConfig | None = None,
    cache_dir: str | Path | None = None,
    weights: str = "unknown",
) -> EvalResult:
    """Perplexity suite + zero-shot tasks of ``model`` without ``removed``, cached on disk.

    ``weights`` is the fingerprint of the loaded weights (:func:`depthprune.model.weights.fingerprint`);
    it keys the cache, so two checkpoints under one id never share entries.
    """
    cfg = cfg or profile.eval_config()
    dtype = str(next(model.parameters()).dtype)
    key = cache_key(model_id, weights, removed, profile, cfg, dtype)
    path = Path(cache_dir) / f"{key}.json" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            stored = read_json(path)
            return EvalResult(stored["metrics"], stored["protocol"], stored["seconds"], cached=True,
                              items=stored["items"], clusters=stored["clusters"], windows=stored["windows"])
        except (JSONFileError, KeyError):
            path.unlink()  # a corrupt or incomplete cache entry is recomputed, never trusted
    start = time.perf_counter()
    dense_blocks = min(removed) if len(removed) else len(find_decoder_layers(model))  # the view's dense prefix
    with skip_layers(model, removed):
        metrics, ppl_protocol, windows = perplexity_suite(model, tokenizer, profile, cfg, dense_blocks)
        zs_metrics, zs_info, items, clusters = zero_shot(model, tokenizer, profile, cfg, dense_blocks)
    metrics.update(zs_metrics)
    protocol = {"config": asdict(cfg), "perplexity": ppl_protocol, "zero_shot": zs_info, "profile": profile.name,
                "dtype": dtype}
    seconds = time.perf_counter() - start
    if path is not None:
        write_json_atomic(path, {"model": model_id, "weights": weights, "removed": sorted(removed),
                                 "metrics": metrics, "protocol": protocol, "seconds": seconds, "items": items,
                                 "clusters": clusters, "windows": windows})
    return EvalResult(metrics, protocol, seconds, items=items, clusters=clusters, windows=windows)
