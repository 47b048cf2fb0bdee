"""The healing text: what a pruned model is fine-tuned on after pruning, read and fingerprinted.

Each profile has a source of its own, disjoint from both objectives' calibration data and from every
evaluation set (:mod:`depthprune.builders.healing_text` says how and why):

* ``tiny`` -- a split of the tiny family's own corpus generator, frozen in ``assets/tiny/data/healing``;
* ``real`` -- The Debian Administrator's Handbook (prose, decontaminated against the real profile's text and
  tasks), frozen in ``assets/real/data/healing``;
* ``paper`` -- the Hub dataset ``yahma/alpaca-cleaned`` (Shortened LLaMA's and LLM-Pruner's healing data),
  each record's instruction, input and output as one text.

A frozen file is read only after its sha256 matches its ``manifest.json``; a missing or corrupt file raises
:class:`HealingDataUnavailable` (an :class:`~depthprune.common.errors.InputError`: exit status 2) naming the
file and the command that rebuilds it. ``DEPTHPRUNE_HEALING_DATA=<file.jsonl>`` (rows with a ``text`` field)
replaces any profile's text; its fingerprint is its own sha256.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from depthprune.common import jsonio
from depthprune.common.errors import InputError
from depthprune.data.sources import DataUnavailable, TextSource, instruction_texts
from depthprune.model.registry import REAL_ASSETS, TINY_ASSETS

ENV = "DEPTHPRUNE_HEALING_DATA"
TRAIN, MANIFEST = "train.jsonl", "manifest.json"
#: profile -> the folder of its frozen healing text (``train.jsonl`` and ``manifest.json``)
FROZEN: dict[str, Path] = {"tiny": TINY_ASSETS / "data" / "healing", "real": REAL_ASSETS / "data" / "healing"}
PAPER_SOURCE = TextSource("yahma/alpaca-cleaned", split="train")


class HealingDataUnavailable(InputError):
    """The healing text cannot be read (missing, corrupt, offline): the message names the file or dataset."""


def _rebuild(profile: str) -> str:
    return f"rebuild it with `depthprune build healing {profile}` (or restore it from the repository)"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(path: Path, what: str) -> list[dict[str, Any]]:
    """The rows of a JSONL file whose rows all hold a ``text`` string; HealingDataUnavailable otherwise."""
    try:
        rows = jsonio.read_jsonl(path)
    except FileNotFoundError:
        raise HealingDataUnavailable(f"{what} {path} is missing") from None
    except (OSError, jsonio.JSONFileError) as err:
        raise HealingDataUnavailable(f"{what} {path} cannot be read: {err}") from None
    bad = next((n for n, r in enumerate(rows, 1) if not isinstance(r, dict) or not isinstance(r.get("text"), str)),
               None)
    if bad is not None:
        raise HealingDataUnavailable(f"{what} {path}: row {bad} has no 'text' string")
    if not rows:
        raise HealingDataUnavailable(f"{what} {path} holds no rows")
    return rows


def _manifest(profile: str) -> tuple[Path, dict[str, Any]]:
    """The frozen file of ``profile`` and its manifest, the file's sha256 checked against it."""
    folder = FROZEN[profile]
    path, manifest_path = folder / TRAIN, folder / MANIFEST
    try:
        manifest = jsonio.read_json(manifest_path)
    except FileNotFoundError:
        raise HealingDataUnavailable(f"the {profile} healing text's manifest {manifest_path} is missing: "
                                     f"{_rebuild(profile)}") from None
    except (OSError, jsonio.JSONFileError) as err:
        raise HealingDataUnavailable(f"the {profile} healing text's manifest {manifest_path} cannot be read "
                                     f"({err}): {_rebuild(profile)}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("sha256"), str):
        raise HealingDataUnavailable(f"the {profile} healing text's manifest {manifest_path} has no sha256: "
                                     f"{_rebuild(profile)}")
    if not path.is_file():
        raise HealingDataUnavailable(f"the {profile} healing text {path} is missing: {_rebuild(profile)}")
    digest = _sha256(path)
    if digest != manifest["sha256"]:
        raise HealingDataUnavailable(f"the {profile} healing text {path} is corrupt: its sha256 {digest[:16]}... is "
                                     f"not its manifest's {manifest['sha256'][:16]}...: {_rebuild(profile)}")
    return path, manifest


def _override() -> Path | None:
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def _check_profile(profile: str) -> None:
    if profile not in (*FROZEN, "paper"):
        raise InputError(f"no healing text for profile {profile!r}; allowed: {', '.join([*FROZEN, 'paper'])}")


@lru_cache(maxsize=1)
def _paper_texts() -> tuple[str, ...]:
    try:
        return tuple(instruction_texts(PAPER_SOURCE))
    except DataUnavailable as err:
        raise HealingDataUnavailable(
            f"the paper profile's healing text, the Hub dataset {PAPER_SOURCE.path}, cannot be loaded ({err}): "
            f"go online or download it into the Hugging Face cache, or point {ENV} at a JSONL file of "
            "{\"text\": ...} rows") from None


def healing_texts(profile_name: str) -> list[str]:
    """The texts a pruned model of ``profile_name`` (tiny, real, paper) is healed on, in their file's order
    (:data:`ENV` replaces them); :class:`HealingDataUnavailable` when they cannot be read."""
    override = _override()
    if override is not None:
        return [r["text"] for r in _rows(override, f"the healing text {ENV} names,")]
    _check_profile(profile_name)
    if profile_name == "paper":
        return list(_paper_texts())
    path, _ = _manifest(profile_name)
    try:
        return [r["text"] for r in _rows(path, f"the {profile_name} healing text")]
    except HealingDataUnavailable as err:
        raise HealingDataUnavailable(f"{err}: {_rebuild(profile_name)}") from None


def healing_fingerprint(profile_name: str) -> dict[str, Any]:
    """What a healed result records of its healing text: ``source``, ``version``, ``sha256``, ``rows``."""
    override = _override()
    if override is not None:
        rows = _rows(override, f"the healing text {ENV} names,")
        return {"source": "user file", "path": str(override), "version": None, "sha256": _sha256(override),
                "rows": len(rows)}
    _check_profile(profile_name)
    if profile_name == "paper":
        texts = _paper_texts()
        digest = hashlib.sha256(jsonio.canonical(list(texts)).encode()).hexdigest()
        return {"source": f"hub dataset {PAPER_SOURCE.path} (instruction, input, output)", "version": None,
                "sha256": digest, "rows": len(texts)}
    _, manifest = _manifest(profile_name)
    source = manifest.get("package") or manifest.get("source", "")
    return {"source": source, "version": manifest.get("version"), "sha256": manifest["sha256"],
            "rows": manifest.get("rows")}
