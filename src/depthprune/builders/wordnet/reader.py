"""A reader of the WordNet 3.0 database files that Debian's ``wordnet-base`` ships.

``/usr/share/wordnet`` holds ``data.{noun,verb,adj,adv}`` (synsets: lemmas, pointers, gloss),
``index.{noun,verb,adj,adv}`` (each lemma's synsets in WordNet's sense order, most frequent
first), ``{noun,verb,adj,adv}.exc`` (irregular inflections) and ``cntlist.rev`` (SemCor tag
counts per sense key); the formats are wndb(5WN), morphy(7WN) and cntlist(5WN). nltk's
WordNet reader cannot read this directory (it needs ``lexnames`` and ``index.sense``, which
Debian's package does not ship), so this module reads the documented line formats itself,
and nothing more: synsets, pointers, glosses split into definition and examples, sense order,
tag counts and exception lists.

Used only by the build of the frozen tasks (:mod:`depthprune.builders.wordnet.tasks`); nothing at run
time reads ``/usr/share/wordnet``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from depthprune.builders import debian

ROOT = Path("/usr/share/wordnet")
APT_PACKAGE = "wordnet-base"
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
#: every file the build reads
FILES = tuple([f"data.{f}" for f in POS_FILES.values()] + [f"index.{f}" for f in POS_FILES.values()]
              + [f"{f}.exc" for f in POS_FILES.values()] + ["cntlist.rev"])
_SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # sense-key ss_type -> file pos (5: satellite)
_QUOTED = re.compile(r'"([^"]*)"')


SourceMissing = debian.SourceMissing  # a source file of the build is not on this machine (names the apt package)


@dataclass
class Synset:
    key: str  # pos + offset, e.g. "n03878963" (offsets are per file)
    pos: str  # n, v, a (satellites included), r
    lexfile: int
    words: tuple[str, ...]  # lemmas as written (underscores for spaces), adjective markers dropped
    pointers: tuple[tuple[str, str], ...]  # (pointer symbol, target synset key)
    definition: str
    examples: tuple[str, ...]

    def related(self, *symbols: str) -> list[str]:
        return [t for s, t in self.pointers if s in symbols]


@dataclass
class WordNet:
    synsets: dict[str, Synset]
    senses: dict[tuple[str, str], tuple[str, ...]]  # (lemma lowercased, pos) -> synset keys, sense order
    tag_counts: dict[tuple[str, str], int]  # (lemma, pos) -> SemCor tag count summed over its senses
    exceptions: dict[tuple[str, str], tuple[str, ...]]  # (lemma, pos) -> irregular inflected forms
    irregular: dict[tuple[str, str], tuple[str, ...]]  # (irregular form, pos) -> its lemmas
    _ancestors: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    def ancestors(self, key: str) -> frozenset[str]:
        """Every synset above ``key`` by hypernym and instance-hypernym pointers (transitively)."""
        if key not in self._ancestors:
            out: set[str] = set()
            stack = list(self.synsets[key].related("@", "@i"))
            while stack:
                k = stack.pop()
                if k not in out:
                    out.add(k)
                    stack.extend(self.synsets[k].related("@", "@i"))
            self._ancestors[key] = frozenset(out)
        return self._ancestors[key]

    def tag_count(self, lemma: str, pos: str) -> int:
        return self.tag_counts.get((lemma, pos), 0)


def require(root: Path = ROOT) -> Path:
    """``root`` if every source file is there, else exit naming the apt package that ships them."""
    missing = [f for f in FILES if not (root / f).is_file()]
    if missing:
        raise SourceMissing(f"WordNet 3.0 database files missing in {root} ({', '.join(missing)}): "
                            f"install Debian's package {APT_PACKAGE} (apt-get install {APT_PACKAGE})")
    return root


def split_gloss(gloss: str) -> tuple[str, tuple[str, ...]]:
    """A gloss -> (definition, examples): examples are the double-quoted parts after the definition."""
    definition = gloss.split('"', 1)[0].strip().rstrip(";").strip()
    return definition, tuple(" ".join(x.split()) for x in _QUOTED.findall(gloss) if x.strip())


def _lemma(word: str) -> str:
    return re.sub(r"\([a-z]+\)$", "", word)  # adjective position markers: (a), (p), (ip)


def _parse_data(path: Path, pos: str) -> dict[str, Synset]:
    out: dict[str, Synset] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            n_words = int(fields[3], 16)
            words = tuple(_lemma(fields[4 + 2 * i]) for i in range(n_words))
            i = 4 + 2 * n_words
            n_ptr = int(fields[i])
            pointers = []
            for k in range(n_ptr):
                symbol, offset, target_pos = fields[i + 1 + 4 * k : i + 4 + 4 * k]
                pointers.append((symbol, ("a" if target_pos == "s" else target_pos) + offset))
            definition, examples = split_gloss(gloss.strip())
            key = pos + fields[0]
            out[key] = Synset(key, pos, int(fields[1]), words, tuple(pointers), definition, examples)
    return out


def _parse_index(path: Path, pos: str) -> dict[tuple[str, str], tuple[str, ...]]:
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):
                continue
            fields = line.split()
            n_synsets, n_ptr = int(fields[2]), int(fields[3])
            offsets = fields[6 + n_ptr :]
            assert len(offsets) == n_synsets, line
            out[(fields[0], pos)] = tuple(pos + o for o in offsets)
    return out


def read(root: Path = ROOT) -> WordNet:
    require(root)
    synsets: dict[str, Synset] = {}
    senses: dict[tuple[str, str], tuple[str, ...]] = {}
    exceptions: dict[tuple[str, str], list[str]] = {}
    irregular: dict[tuple[str, str], list[str]] = {}
    for pos, name in POS_FILES.items():
        synsets.update(_parse_data(root / f"data.{name}", pos))
        senses.update(_parse_index(root / f"index.{name}", pos))
        with open(root / f"{name}.exc", encoding="utf-8") as f:
            for line in f:
                form, *lemmas = line.split()
                for lemma in lemmas:
                    exceptions.setdefault((lemma, pos), []).append(form)
                    irregular.setdefault((form, pos), []).append(lemma)
    tag_counts: dict[tuple[str, str], int] = {}
    with open(root / "cntlist.rev", encoding="utf-8") as f:
        for line in f:
            key, _number, count = line.split()
            lemma, _, rest = key.partition("%")
            k = (lemma, _SS_TYPE[rest[0]])
            tag_counts[k] = tag_counts.get(k, 0) + int(count)
    return WordNet(synsets, senses, tag_counts, {k: tuple(sorted(set(v))) for k, v in exceptions.items()},
                   {k: tuple(sorted(set(v))) for k, v in irregular.items()})


#: morphy(7WN)'s detachment rules: (suffix, ending) per part of speech
_DETACH = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
          ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}


def base_forms(wn: WordNet, form: str, pos: str) -> list[tuple[str, str]]:
    """(lemma, how) for each lemma of ``pos`` that ``form`` inflects, as morphy finds them: the form
    itself (``base``), an irregular form from the exception list (``irregular``), or a detachment
    rule (``-s``, ``-ed``, ``-ing``, ``-er``, ``-est``...: the suffix removed)."""
    out: list[tuple[str, str]] = []
    if (form, pos) in wn.senses:
        out.append((form, "base"))
    for lemma in wn.irregular.get((form, pos), ()):
        if (lemma, pos) in wn.senses:
            out.append((lemma, "irregular"))
    for suffix, ending in _DETACH[pos]:
        if form.endswith(suffix) and len(form) > len(suffix):
            lemma = form[: len(form) - len(suffix)] + ending
            if (lemma, pos) in wn.senses:
                out.append((lemma, "-" + suffix))
    first: dict[str, str] = {}
    for lemma, how in out:  # each lemma once, with the first way it was found
        first.setdefault(lemma, how)
    return list(first.items())

