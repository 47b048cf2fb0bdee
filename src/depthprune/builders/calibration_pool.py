"""The enlarged calibration pool of the real profile: the reference topics' calibration split
plus the prose of Python's tutorial, HOWTOs and FAQ (Debian ``python3.11-doc``).

Why: the calibration-size curve (``depthprune measure calibration-curve``) draws three
*disjoint* calibration samples of up to 64 windows x 128 tokens, and the reference topics'
calibration split (~45k tokens in 35 documents) cannot hold them without windows overlapping.

    depthprune build pool     # needs: apt-get install python3.11-doc

writes ``assets/real/data/calibration_pool.jsonl`` (one document per source page, the
calibration split's documents first, unchanged) and its entry in ``manifest.json`` (package
version, the sha256 of every source page, the licence). A page that shares any sentence of
eight or more words with the validation or test split is left out, so the pool never holds
evaluation text. The suite reads only the frozen file; CI needs no apt.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from depthprune.builders.debian import package_version
from depthprune.builders.python_docs import DATA, LICENSE, _write_manifest, frozen_split, read_manifest
from depthprune.common.jsonio import write_jsonl

SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
SECTIONS = ("tutorial", "howto", "faq")
PACKAGE = "python3.11-doc"
POOL = DATA / "calibration_pool.jsonl"
MIN_SHARED_WORDS = 8

_ROLE = re.compile(r":[\w:+.-]+:`([^`]*)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`__?")
_LITERAL = re.compile(r"``([^`]*)``")
_REF = re.compile(r"`([^`]+)`_{1,2}")
_UNDERLINE = re.compile(r"^([=\-~*^\"'#+.`])\1{2,}\s*$")
_DIRECTIVE = re.compile(r"^\s*\.\.\s")
_OPTION = re.compile(r"^\s+:[\w-]+:")


def _role_text(match: re.Match[str]) -> str:
    text = match.group(1)
    inner = re.search(r"^(.*?)\s*<[^>]*>$", text)
    text = inner.group(1) if inner else text
    return text.lstrip("~!")


def rst_to_text(source: str) -> str:
    """A documentation page's text as a reader sees it: roles, links and literals become their
    words, section underlines, directives, comments and their options go; prose and code examples stay."""
    out: list[str] = []
    skipping = False
    for line in source.splitlines():
        if _DIRECTIVE.match(line):
            # a directive or comment: drop it with its option lines; its indented body is kept (notes,
            # code blocks) unless it is a comment or an index/toctree/only list
            head = line.strip()[3:]
            skipping = "::" not in head or head.split("::")[0].strip() in {"index", "toctree", "only", "highlight",
                                                                          "sectionauthor", "moduleauthor"}
            continue
        if skipping:
            if line.strip() and not line[:1].isspace():
                skipping = False
            else:
                continue
        if _OPTION.match(line) or _UNDERLINE.match(line):
            continue
        line = _ROLE.sub(_role_text, line)
        line = _LINK.sub(r"\1", line)
        line = _LITERAL.sub(r"\1", line)
        line = _REF.sub(r"\1", line)
        line = line.replace("|", "") if line.strip().startswith("|") else line
        if line.rstrip().endswith("::"):
            line = line.rstrip()[:-1] if not line.strip() == "::" else ""
        out.append(line.rstrip())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()
    return text + "\n"


def _sentences(text: str) -> set[str]:
    """Every run of MIN_SHARED_WORDS consecutive words (lower-cased, punctuation dropped)."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {" ".join(words[i : i + MIN_SHARED_WORDS]) for i in range(len(words) - MIN_SHARED_WORDS + 1)}


def build_pool(sources: Path = SOURCES) -> dict[str, Any]:
    pages = sorted(p for s in SECTIONS for p in (sources / s).glob("*.rst.txt") if p.name != "index.rst.txt")
    if not pages:
        raise SystemExit(f"no pages under {sources}/{{{','.join(SECTIONS)}}}: apt-get update && apt-get install "
                         f"{PACKAGE}")
    held_out = set().union(*(_sentences(d["text"]) for s in ("validation", "test") for d in frozen_split(s)))
    rows: list[dict[str, Any]] = [{"page": f"topics/{d['topic']}", "text": d["text"]} for d in
                                  frozen_split("calibration")]
    kept, dropped, hashes = [], [], {}
    for page in pages:
        raw = page.read_bytes()
        name = page.relative_to(sources).as_posix()
        hashes[name] = hashlib.sha256(raw).hexdigest()
        text = rst_to_text(raw.decode("utf-8"))
        if _sentences(text) & held_out:
            dropped.append(name)
            continue
        kept.append(name)
        rows.append({"page": name.removesuffix(".rst.txt"), "text": text})
    write_jsonl(POOL, rows, ensure_ascii=False)
    manifest = read_manifest()
    manifest["calibration_pool"] = {
        "file": POOL.name,
        "source": f"the calibration split's {len(rows) - len(kept)} documents, then the pages of "
                  f"{sources}/{{{','.join(SECTIONS)}}} (Debian {PACKAGE} {package_version(PACKAGE)}), converted from "
                  "reStructuredText by depthprune.builders.calibration_pool.rst_to_text",
        "license": LICENSE,
        "documents": len(rows),
        "words": sum(len(r["text"].split()) for r in rows),
        "pages_kept": kept,
        "pages_dropped": {"rule": f"shares a run of {MIN_SHARED_WORDS} words with the validation or test split",
                          "pages": dropped},
        "source_sha256": hashes,
    }
    _write_manifest(manifest)
    return manifest["calibration_pool"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``depthprune build pool`` has no options: the pool is a function of the frozen splits and the docs."""


def run(args: argparse.Namespace) -> int:
    """``depthprune build pool``: build the pool and print its size."""
    info = build_pool()
    print(json.dumps({k: info[k] for k in ("documents", "words")} | {"dropped": len(info["pages_dropped"]["pages"])}))
    return 0
