"""Calibration and evaluation data: named sources, and the protocols that cut them.

Every dataset is a :class:`TextSource` read through ``datasets.load_dataset`` — a Hub
dataset for the paper's models, a local JSON/JSONL fixture for the tiny family — so
the same protocol code runs on both. Which source a dataset name (``c4_train``,
``wikitext2``, ...) stands for is the data profile's to say (:mod:`depthprune.data.profiles`).

Protocols (the paper's, after GPTQ/SLEB):

* calibration windows: pick a random document longer than the window, then a random
  window inside it; repeat ``n_samples`` times; seeded (:func:`calibration_windows`).
* evaluation windows: join the split (``"\\n\\n"`` for WikiText-2, ``" "`` for C4),
  tokenise once, cut consecutive non-overlapping windows (:func:`eval_windows`).
"""

from __future__ import annotations

import random
import re
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from depthprune.common.params import parse_shard
from depthprune.model.registry import BOS_EVERY_WINDOW

T = TypeVar("T")


@dataclass(frozen=True)
class TextSource:
    """Arguments for ``datasets.load_dataset`` plus the field that holds the text."""

    path: str  # Hub dataset id, or a builder ("json", "text") with data_files
    split: str = "train"
    name: str | None = None
    data_files: str | dict[str, str] | None = None
    field: str = "text"
    limit: int | None = None  # keep the first N records (e.g. C4 validation: 1100)

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class DataUnavailable(RuntimeError):
    """A dataset could not be read (no local copy and no network)."""


def load_records(source: TextSource) -> list[dict[str, Any]]:
    """All records (dicts) of a source, first ``limit`` only if set.

    A Hub dataset named with ``data_files`` (C4's shards) that ``datasets`` cannot load is read
    from the Hub cache's copy of those files, with the builder their extension implies (the one
    ``datasets`` infers online). Offline, ``datasets`` cannot reuse even its own cache of such a
    load: the cache is keyed by the data files as resolved online (``hf://...@<commit>``), the
    offline lookup by the files as given (huggingface/datasets#6837, open), so a node that
    downloaded C4 and then went offline would fail here although the shard is on its disk.
    """
    import datasets

    if source.path == "json" and source.data_files is not None:
        files = source.data_files.values() if isinstance(source.data_files, dict) else [source.data_files]
        for f in files:
            if "://" not in f and not Path(f).is_file():
                raise DataUnavailable(f"data file not found: {f}")
    split = source.split
    if source.limit is not None:
        split = f"{split}[:{source.limit}]"
    try:
        ds = datasets.load_dataset(source.path, source.name, data_files=source.data_files, split=split)
    except Exception as err:  # noqa: BLE001 - datasets raises many types for "not reachable"
        cached = hub_cache_files(source)
        if cached is None:
            raise DataUnavailable(f"cannot load {source.describe()}: {type(err).__name__}: {err}") from err
        builder, files = cached
        try:
            ds = datasets.load_dataset(builder, data_files=files, split=split)
        except Exception as err2:  # noqa: BLE001
            raise DataUnavailable(f"cannot load {source.describe()} (nor its Hub-cache files {files}): "
                                  f"{type(err2).__name__}: {err2}") from err
    return list(ds)


_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".txt": "text"}


def hub_cache_files(source: TextSource) -> tuple[str, dict[str, str]] | None:
    """``(builder, {split: local path})`` of a Hub dataset's ``data_files`` in the Hub cache, or None
    (not a Hub id with relative data files, a file not cached, or no builder for its extension)."""
    if source.path.count("/") != 1 or not isinstance(source.data_files, dict):
        return None
    from huggingface_hub import hf_hub_download

    files, builders = {}, set()
    for split, name in source.data_files.items():
        if not isinstance(name, str) or "://" in name:
            return None
        plain = Path(name).with_suffix("") if Path(name).suffix in (".gz", ".bz2", ".xz", ".zst") else Path(name)
        builder = _BUILDERS.get(plain.suffix)
        if builder is None:
            return None
        try:
            files[split] = hf_hub_download(source.path, name, repo_type="dataset", local_files_only=True)
        except Exception:  # noqa: BLE001 - not in the cache
            return None
        builders.add(builder)
    return (builders.pop(), files) if len(builders) == 1 else None


def load_texts(source: TextSource) -> list[str]:
    """The text field of every record."""
    records = load_records(source)
    if records and source.field not in records[0]:
        raise DataUnavailable(
            f"{source.describe()}: records have no field {source.field!r} (fields: {', '.join(records[0])})"
        )
    return [r[source.field] for r in records]


#: Set (True) on the tokenizer of a model that needs its BOS at the start of every sequence it reads
#: (:func:`depthprune.model.loading.load_model` does it for a registry entry with ``bos_every_window``: Gemma,
#: whose loss without it is far off: on gemma3-270m, 300 tokens from inside a document score 5.96 nats
#: without a BOS and 4.32 with one). Every window then starts with the BOS: it replaces the window's
#: first token, which no window predicts, so the draws and the predicted tokens are the same as
#: without it (llama.cpp's perplexity does the same). Without the flag a window holds the BOS only
#: where it starts at its text's start (GPTQ/SLEB, the paper's protocol).
_WINDOW_BOS = "the tokenizer's BOS as the first token of every window (in place of a token no window predicts)"


def _bos_every_window(windows: torch.Tensor, tokenizer) -> str | None:
    """Put the BOS first in every window where the tokenizer is flagged (:data:`BOS_EVERY_WINDOW`); the
    protocol's ``bos`` then (None: unflagged, windows untouched)."""
    if not getattr(tokenizer, BOS_EVERY_WINDOW, False):
        return None
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        raise ValueError(f"{type(tokenizer).__name__} is flagged {BOS_EVERY_WINDOW} but has no BOS token")
    windows[:, 0] = bos
    return _WINDOW_BOS


@dataclass(frozen=True)
class WindowProtocol:
    """How token windows were cut; recorded with every result."""

    kind: str  # "random-doc" or "contiguous"
    seq_len: int
    n_samples: int | None = None
    seed: int | None = None
    joiner: str | None = None
    bos: str = "tokenizer default (added once at the start of each tokenised text)"
    stride: int | None = None
    token_weighting: str = "every predicted token weighs the same"
    extra: dict[str, Any] = field(default_factory=dict)


def calibration_windows(
    texts: Sequence[str],
    tokenizer,
    n_samples: int,
    seq_len: int,
    seed: int = 0,
) -> tuple[torch.Tensor, WindowProtocol]:
    """``n_samples`` windows of ``seq_len`` tokens, each from one random long document.

    The GPTQ/SLEB C4 protocol. Documents no longer than ``seq_len`` tokens are skipped;
    if fewer than one in 1000 random draws fits, the error says so (raise the corpus or
    lower ``seq_len``) instead of looping forever.
    """
    if n_samples < 1 or seq_len < 2:
        raise ValueError(f"need n_samples >= 1 and seq_len >= 2, got {n_samples}, {seq_len}")
    if not texts:
        raise DataUnavailable("calibration corpus is empty")
    rng = random.Random(seed)
    windows: list[list[int]] = []
    misses = 0
    cache: dict[int, list[int]] = {}
    while len(windows) < n_samples:
        i = rng.randrange(len(texts))
        ids = cache.get(i)
        if ids is None:
            ids = tokenizer(texts[i])["input_ids"]
            cache[i] = ids
        if len(ids) <= seq_len:
            misses += 1
            if misses > 1000 * n_samples:
                raise DataUnavailable(f"almost no document is longer than seq_len={seq_len} tokens")
            continue
        start = rng.randrange(len(ids) - seq_len)
        windows.append(ids[start : start + seq_len])
    out = torch.tensor(windows, dtype=torch.long)
    bos = _bos_every_window(out, tokenizer)
    protocol = (WindowProtocol("random-doc", seq_len, n_samples, seed, bos=bos) if bos
                else WindowProtocol("random-doc", seq_len, n_samples, seed))
    return out, protocol


def training_windows(texts: Sequence[str], tokenizer, seq_len: int, n_windows: int,
                     seed: int = 0) -> tuple[torch.Tensor, WindowProtocol]:
    """``n_windows`` windows of ``seq_len`` tokens for fine-tuning (a heal): every text tokenised with its EOS
    after it, all joined, cut into consecutive windows, taken in an order shuffled by ``seed``; a budget
    past the text's windows takes them again in a new order (an epoch each), so no window repeats within one.
    """
    if n_windows < 1 or seq_len < 2:
        raise ValueError(f"need n_windows >= 1 and seq_len >= 2, got {n_windows}, {seq_len}")
    if not texts:
        raise DataUnavailable("training corpus is empty")
    eos = getattr(tokenizer, "eos_token_id", None)
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        if eos is not None:
            ids.append(eos)
    available = len(ids) // seq_len
    if available < 1:
        raise DataUnavailable(f"the training corpus has {len(ids)} tokens: not one window of {seq_len}")
    cut = torch.tensor(ids[: available * seq_len], dtype=torch.long).view(available, seq_len)
    gen = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(available, generator=gen) for _ in range(-(-n_windows // available))])
    out = cut[order[:n_windows]].clone()
    bos = _bos_every_window(out, tokenizer)
    extra = {"windows_available": available, "epochs": round(n_windows / available, 4), "eos_between_texts": eos is not None}
    protocol = WindowProtocol("contiguous-shuffled", seq_len, n_windows, seed, bos=bos or "none added",
                              extra=extra)
    return out, protocol


def instruction_texts(source: TextSource) -> list[str]:
    """Commonsense-170k-style records as the text a model is fine-tuned on: the instruction
    (plus ``input`` if any), a blank line, the ``output`` — the margin's calibration data read
    as plain text, for perplexity on the same data (the data-vs-loss control)."""
    out = []
    for r in load_records(source):
        if not isinstance(r.get("instruction"), str) or not isinstance(r.get("output"), str):
            raise DataUnavailable(f"{source.describe()}: records need 'instruction' and 'output' strings "
                                  f"(fields: {', '.join(r)})")
        extra = r.get("input") or ""
        prompt = f"{r['instruction']}\n\n{extra}" if extra.strip() else r["instruction"]
        out.append(f"{prompt}\n\n{r['output']}")
    return out


def joined_windows(
    texts: Sequence[str], tokenizer, n_samples: int, seq_len: int, seed: int = 0, joiner: str = "\n\n"
) -> tuple[torch.Tensor, WindowProtocol]:
    """``n_samples`` consecutive windows of ``seq_len`` tokens from the texts joined into one
    stream (in a seeded random order, ``joiner`` between them): for records shorter than a
    window (Commonsense-170k's are 40-120 words), where ``calibration_windows`` finds none."""
    if n_samples < 1 or seq_len < 2:
        raise ValueError(f"need n_samples >= 1 and seq_len >= 2, got {n_samples}, {seq_len}")
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    need = n_samples * seq_len
    stream: list[int] = []
    used = 0
    for i in order:
        if len(stream) >= need:
            break
        ids = tokenizer(texts[i] if not stream else joiner + texts[i])["input_ids"]
        if stream and ids and ids[0] == getattr(tokenizer, "bos_token_id", None):
            ids = ids[1:]  # one BOS, at the start of the stream
        stream.extend(ids)
        used += 1
    if len(stream) < need:
        raise DataUnavailable(f"the texts give {len(stream)} tokens; {n_samples} x {seq_len} = {need} are needed")
    windows = torch.tensor(stream[:need], dtype=torch.long).reshape(n_samples, seq_len)
    bos = _bos_every_window(windows, tokenizer)
    protocol = WindowProtocol("joined", seq_len, n_samples, seed, joiner=joiner,
                              bos=bos or "tokenizer default, once at the start of the joined stream",
                              extra={"records_used": used, "order": "seeded shuffle of the records"})
    return windows, protocol


def eval_windows(
    texts: Sequence[str],
    tokenizer,
    seq_len: int,
    joiner: str = "\n\n",
    max_windows: int | None = None,
) -> tuple[torch.Tensor, WindowProtocol]:
    """Join, tokenise once, cut non-overlapping ``seq_len`` windows (the tail is dropped).

    Where the text holds fewer than ``max_windows`` windows (GPTQ's C4 protocol takes 256 x 2048
    tokens from the first 1100 validation documents, which a tokenizer with a large vocabulary
    may not reach), the windows there are used, as GPTQ does, but never silently: a warning,
    and the protocol records ``requested_windows`` beside the ``n_samples`` actually cut.
    """
    ids = tokenizer(joiner.join(texts))["input_ids"]
    n = len(ids) // seq_len
    if max_windows is not None and n < max_windows:
        warnings.warn(f"the evaluation text holds {n} windows of {seq_len} tokens ({len(ids)} tokens), "
                      f"fewer than the {max_windows} asked for; using {n}", stacklevel=2)
    if max_windows is not None:
        n = min(n, max_windows)
    if n == 0:
        raise DataUnavailable(f"text has {len(ids)} tokens, fewer than one window of {seq_len}")
    windows = torch.tensor(ids[: n * seq_len], dtype=torch.long).view(n, seq_len)
    bos = _bos_every_window(windows, tokenizer)
    extra = {"requested_windows": max_windows, "text_tokens": len(ids)} if max_windows is not None else {}
    protocol = WindowProtocol("contiguous", seq_len, n, joiner=joiner, stride=seq_len,
                              bos=bos or "tokenizer default, once at the start of the joined text", extra=extra)
    return windows, protocol


# -- multiple-choice calibration items (the margin objective) --------------------------------


@dataclass(frozen=True)
class ChoiceItem:
    """A prompt, its answer options (continuations), and the index of the right one."""

    prompt: str
    choices: tuple[str, ...]
    gold: int


ANSWER_STYLES = ("label", "option", "cloze")
_FORMAT_RE = re.compile(r"Answer format:\s*([^\n]+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _option_marks(text: str, labels: tuple[str, ...]) -> list[re.Match[str] | None]:
    """Each label's ``Label:`` marker in ``text`` (``Option1: Ian``), or None where it has none."""
    return [re.search(rf"\b{re.escape(label)}\s*:", text, re.IGNORECASE) for label in labels]


def _option_texts(instruction: str, labels: tuple[str, ...]) -> tuple[str, ...]:
    """The text after each ``Label:`` marker (``Option1: Ian``), up to the next marker.

    A label with no marker in the instruction (``true``/``false``) is its own text.
    """
    found = _option_marks(instruction, labels)
    if not any(found):
        return labels
    marks = [m for m in found if m is not None]
    if len(marks) < len(found):
        missing = [lab for lab, m in zip(labels, found) if m is None]
        raise ValueError(f"options {missing} are not spelled out in the instruction")
    end = _FORMAT_RE.search(instruction)
    stops = sorted([m.start() for m in marks] + [end.start() if end else len(instruction)])
    texts = []
    for m in marks:
        stop = min(x for x in stops if x > m.start())
        texts.append(" ".join(instruction[m.end() : stop].split()))
    if any(not t for t in texts):
        raise ValueError(f"an option of {labels} has no text in the instruction")
    return tuple(texts)


def parse_commonsense_record(
    record: dict[str, Any], answer_lead: str = "the correct answer is", answer: str = "label"
) -> ChoiceItem:
    """One Commonsense-170k record -> a :class:`ChoiceItem`.

    The options are the labels of the instruction's last line (``Answer format:
    answer1/answer2/...``); the gold one is ``record['answer']``. The prompt is the
    instruction (plus ``input`` if any) followed by the record's own answer lead
    (``"the correct answer is"``). What is scored after it:

    * ``answer="label"``: the label (``" answer2"``), as the record's ``output`` writes it;
    * ``answer="option"``: the option's own text (``" Dennis"``), read from the
      instruction's ``Option2: Dennis`` line (labels without such a line, like
      ``true``/``false``, are their own text).
    * ``answer="cloze"``: no options in the prompt; each option's text is scored as the
      continuation of the question stem, in lm-eval's templates: a fill-in-the-blank
      sentence is split at ``_`` (context before it, option + rest of the sentence
      scored, as winogrande's partial scoring), an ``ending`` continues the sentence
      (hellaswag), anything else is ``Question: <stem>\\nAnswer:`` (arc, piqa, boolq).
      For models that cannot read option lists in context (the tiny family).
    """
    instruction = record.get("instruction")
    gold = record.get("answer")
    if not isinstance(instruction, str) or not isinstance(gold, str):
        raise ValueError(f"record lacks 'instruction'/'answer' strings: {str(record)[:120]}")
    if answer not in ANSWER_STYLES:
        raise ValueError(f"answer must be one of {ANSWER_STYLES}, got {answer!r}")
    m = None
    for m in _FORMAT_RE.finditer(instruction):  # noqa: B007 - the last match is wanted
        pass
    if m is None:
        raise ValueError(f"no 'Answer format:' line in instruction: {instruction[-120:]!r}")
    labels = tuple(x.strip() for x in m.group(1).split("/") if x.strip())
    gold_label = gold.strip()
    if gold_label not in labels:
        raise ValueError(f"answer {gold_label!r} is not one of the options {labels}")
    text = instruction
    extra = record.get("input") or ""
    if extra.strip():
        text = f"{text}\n\n{extra}"
    gold_index = labels.index(gold_label)
    if answer == "cloze":
        return _cloze_item(instruction, extra, labels, gold_index)
    prompt = f"{text}\n\n{answer_lead}"
    scored = labels if answer == "label" else _option_texts(instruction, labels)
    return ChoiceItem(prompt, tuple(f" {x}" for x in scored), gold_index)


def _cloze_item(instruction: str, extra: str, labels: tuple[str, ...], gold: int) -> ChoiceItem:
    """The ``answer="cloze"`` form of a record (see :func:`parse_commonsense_record`)."""
    texts = _option_texts(instruction, labels)
    _preamble, sep, body = instruction.partition(": ")
    if not sep:
        raise ValueError(f"no task preamble ('...: ') in instruction: {instruction[:120]!r}")
    cut = [m.start() for m in _option_marks(body, labels) if m is not None]
    end = _FORMAT_RE.search(body)
    stem = " ".join(body[: min(cut + [end.start() if end else len(body)])].split())
    if extra.strip():
        stem = f"{stem} {' '.join(extra.split())}"
    if not stem:
        raise ValueError(f"empty question stem in instruction: {instruction[:120]!r}")
    # "ending" labels first: an ending continues the sentence even where the stem happens to
    # hold one underscore (Python's docs: "sys.exc_info()"), which is not a blank to fill
    if labels[0].lower().startswith("ending"):
        return ChoiceItem(stem, tuple(f" {t}" for t in texts), gold)
    if stem.count("_") == 1:
        before, after = stem.split("_")
        return ChoiceItem(before.rstrip(), tuple(f" {t}{after}" for t in texts), gold)
    return ChoiceItem(f"Question: {stem}\nAnswer:", tuple(f" {t}" for t in texts), gold)


def take_shard(pool: Sequence[T], shard: str) -> list[T]:
    """Every n-th element of ``pool`` from the i-th (``shard="i/n"``): the n shards of one pool are
    disjoint, so calibration samples drawn from different shards share no document or record."""
    parsed = parse_shard(shard)
    if parsed is None:
        return list(pool)
    i, n = parsed
    return [x for j, x in enumerate(pool) if j % n == i]


def load_choice_items(source: TextSource, n_items: int, seed: int = 0, answer: str = "label",
                      shard: str = "") -> list[ChoiceItem]:
    """``n_items`` records sampled without replacement (seeded) from the pool (or one shard of it), parsed."""
    records = take_shard(load_records(source), shard)
    if n_items > len(records):
        where = f" (shard {shard})" if shard else ""
        raise ValueError(f"asked for {n_items} items but {source.describe()}{where} has {len(records)}")
    rng = random.Random(seed)
    picked = rng.sample(range(len(records)), n_items)
    return [parse_commonsense_record(records[i], answer=answer) for i in picked]

