"""Build the tiny family end to end: ``depthprune build tiny all``.

Stages (each can be run alone; ``all`` runs them in this order)::

    corpus     generate the training corpora (raw text, kept out of the package,
               in the work dir, default <repo>/.cache/tiny)
    tokenizer  train the BPE tokenizer          -> assets/tiny/tokenizer/
    fixtures   datasets + lm-eval tasks         -> assets/tiny/data/, assets/tiny/tasks/
    train      train the three models           -> assets/tiny/models/<name>/
    check      measure quality through the benchmark's core (Session.calibrate: dense
               losses and single-layer-removal sweeps; Session.evaluate: lm-eval and
               perplexity) and add it to each model's card.json/README.md (not part of
               ``all``; a few minutes)

Everything is a deterministic function of ``--seed`` (the world seed) and the
run settings in :mod:`depthprune.tiny.train`; stage wall times are written to
``assets/tiny/build.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from depthprune.common.jsonio import read_json, read_jsonl, write_json, write_jsonl

PKG_DIR = Path(__file__).resolve().parents[1]          # src/depthprune
ASSETS = PKG_DIR / "assets" / "tiny"
MODELS_DIR = ASSETS / "models"
TOKENIZER_DIR = ASSETS / "tokenizer"

# training corpus sizes (documents)
N_DOCS = {"base": 20000, "continue": 12000, "val": 400}


def default_work_dir() -> Path:
    if env := os.environ.get("DEPTHPRUNE_TINY_WORK"):
        return Path(env)
    repo = PKG_DIR.parents[1]
    if (repo / "pyproject.toml").exists():
        return repo / ".cache" / "tiny"
    return Path.home() / ".cache" / "depthprune" / "tiny"


def _record(stage: str, seconds: float, extra: dict | None = None):
    path = ASSETS / "build.json"
    data = read_json(path) if path.exists() else {}
    data.setdefault("stages", {})[stage] = {"wall_s": round(seconds, 1), **(extra or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data, sort_keys=False)


def stage_corpus(args) -> None:
    from .corpus import documents
    from .world import World

    world = World(args.seed)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for mix, n in N_DOCS.items():
        name = "base" if mix == "val" else mix
        docs = documents(world, n, seed=(1000 if mix == "val" else 0), mix=name)
        write_jsonl(work / f"corpus-{mix}.jsonl", ({"text": d} for d in docs), ensure_ascii=False)
        print(f"corpus {mix}: {n} docs -> {work / f'corpus-{mix}.jsonl'}")


def _read_corpus(work: Path, mix: str) -> list[str]:
    return [row["text"] for row in read_jsonl(work / f"corpus-{mix}.jsonl")]


def stage_tokenizer(args) -> None:
    from . import tokenizer

    texts = _read_corpus(Path(args.work_dir), "base")
    tok = tokenizer.train_tokenizer(texts, vocab_size=4096)
    tokenizer.save(tok, TOKENIZER_DIR, model_max_length=1024)
    _fix_tokenizer_config(TOKENIZER_DIR)
    print(f"tokenizer -> {TOKENIZER_DIR}")


def _fix_tokenizer_config(d: Path) -> None:
    # the generic fast-tokenizer class name loads with transformers 4.x and 5.x alike
    p = d / "tokenizer_config.json"
    cfg = read_json(p)
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg.pop("backend", None)
    write_json(p, cfg, sort_keys=False)


def stage_fixtures(args) -> None:
    from . import fixtures
    from .world import World

    counts = fixtures.build(World(args.seed), ASSETS)
    print(json.dumps(counts, indent=1))


def _tokens(work: Path, mix: str, tok) -> list[np.ndarray]:
    from .train import encode_docs

    cache = work / f"tokens-{mix}.npz"
    if cache.exists() and cache.stat().st_mtime > (work / f"corpus-{mix}.jsonl").stat().st_mtime \
            and cache.stat().st_mtime > (TOKENIZER_DIR / "tokenizer.json").stat().st_mtime:
        z = np.load(cache)
        return np.split(z["stream"], z["offsets"][1:-1])
    docs = encode_docs(tok, _read_corpus(work, mix))
    offsets = np.cumsum([0] + [len(d) for d in docs])
    np.savez(cache, stream=np.concatenate(docs), offsets=offsets)
    return docs


def c4_validation_rows(tok, seq_len: int = 256, max_rows: int = 64) -> np.ndarray:
    from .train import encode_docs, pack

    texts = [row["text"] for row in read_jsonl(ASSETS / "data" / "c4" / "validation.jsonl")]
    return pack(encode_docs(tok, texts), seq_len)[:max_rows]


def stage_train(args) -> None:
    from transformers import AutoTokenizer

    from .train import SPECS, pack, train_model

    work = Path(args.work_dir)
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    names = args.models or list(SPECS)
    for name in names:
        spec = SPECS[name]
        if args.steps:
            spec.steps = args.steps
        docs = _tokens(work, spec.mix, tok)
        rows = pack(docs, spec.seq_len)
        val = {"c4_validation": c4_validation_rows(tok, 256),
               "corpus_validation": pack(_tokens(work, "val", tok), 256)[:64]}
        t0 = time.time()
        card = train_model(spec, rows, val, MODELS_DIR / name, TOKENIZER_DIR, MODELS_DIR, threads=args.threads,
                           extra_card={"world_seed": args.seed,
                                       "corpus_docs": N_DOCS[spec.mix],
                                       "validation_sets": {"c4_validation": "first 64 packed 256-token rows of "
                                                           "assets/tiny/data/c4/validation.jsonl (held-out entities)",
                                                           "corpus_validation": "64 packed 256-token rows of a fresh "
                                                           "stream of the base mix"}})
        _record(f"train:{name}", time.time() - t0, {"train_wall_s": card["train_wall_s"]})
        print(f"{name}: val {card['validation_loss']}  wall {card['train_wall_s']:.0f}s")


def stage_check(args) -> None:
    from .check import check_model

    for name in args.models or ["tiny-llama3", "tiny-llama3.1", "tiny-qwen3"]:
        res = check_model(MODELS_DIR / name, threads=args.threads, limit=args.limit)
        print(json.dumps({name: res}, indent=1))


STAGES = {"corpus": stage_corpus, "tokenizer": stage_tokenizer, "fixtures": stage_fixtures,
          "train": stage_train, "check": stage_check}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``depthprune build tiny``."""
    ap.add_argument("stage", choices=[*STAGES, "all"])
    ap.add_argument("--seed", type=int, default=0, help="world seed (default 0)")
    ap.add_argument("--work-dir", default=str(default_work_dir()), help="where the raw corpus goes")
    ap.add_argument("--models", nargs="*", help="subset of models (train/check)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1; part of the recipe)")
    ap.add_argument("--steps", type=int, default=None, help="override training steps (for quick trials)")
    ap.add_argument("--limit", type=int, default=None, help="check: items per lm-eval task")


def run(args: argparse.Namespace) -> int:
    """``depthprune build tiny STAGE``: run the stage (``all``: every stage but ``check``, in order)."""
    order = ["corpus", "tokenizer", "fixtures", "train"] if args.stage == "all" else [args.stage]
    for st in order:
        t0 = time.time()
        STAGES[st](args)
        dt = time.time() - t0
        if st != "train":
            _record(st, dt)
        print(f"[{st}] {dt:.1f}s", file=sys.stderr)
    return 0
