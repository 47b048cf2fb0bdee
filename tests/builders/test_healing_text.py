"""builders/healing_text.py: the frozen healing texts are what their builder gives, match their manifests, and
share nothing with their profile's calibration or evaluation data (each rule recomputed here on its own)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from depthprune.builders import healing_text as build
from depthprune.common import jsonio
from depthprune.model.registry import REAL_ASSETS, TINY_ASSETS


def manifest(profile):
    return jsonio.read_json(build.OUT[profile] / build.MANIFEST)


def rows(profile):
    return jsonio.read_jsonl(build.OUT[profile] / build.TRAIN)



def json_values(path):
    return jsonio.read_jsonl(path) if path.suffix == ".jsonl" else [json.loads(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("profile", ["tiny", "real"])
def test_the_manifest_matches_the_frozen_file(profile):
    m, rs = manifest(profile), rows(profile)
    folder = build.OUT[profile]
    assert m["sha256"] == hashlib.sha256((folder / build.TRAIN).read_bytes()).hexdigest()
    assert m["rows"] == len(rs) and m["characters"] == sum(len(r["text"]) for r in rs)
    assert m["words"] == sum(len(r["text"].split()) for r in rs)
    assert m["license"] and m["source"] and m["version"] and m["disjointness"]["rule"]
    assert m["built_by"] == f"depthprune build healing {profile}"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [build.TRAIN, build.MANIFEST] + ([build.HANDBOOK_LICENSE] if profile == "real" else []))


def test_the_tiny_text_rebuilds_from_the_generator():
    rebuilt, drops = build.tiny_rows()
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rebuilt)
    assert hashlib.sha256(text.encode()).hexdigest() == manifest("tiny")["sha256"]
    assert drops["documents_dropped"] == manifest("tiny")["disjointness"]["documents_dropped"]


def test_the_tiny_text_shares_no_paragraph_with_calibration_or_evaluation():
    files = [TINY_ASSETS / "data" / "c4" / "train.jsonl", TINY_ASSETS / "data" / "commonsense" / "train.json",
             TINY_ASSETS / "data" / "c4" / "validation.jsonl", *sorted((TINY_ASSETS / "data" / "wikitext").glob("*")),
             *sorted((TINY_ASSETS / "data" / "lambada").glob("*")), *sorted((TINY_ASSETS / "tasks" / "data").rglob("*.jsonl"))]
    assert len(files) >= 15

    def paragraphs(text):
        return {" ".join(b.split()) for b in re.split(r"\n\s*\n", text) if len(b.split()) >= 8}

    reference = {p for f in files for v in json_values(f) for s in build.json_strings(v) for p in paragraphs(s)}
    healing = {p for r in rows("tiny") for p in paragraphs(r["text"])}
    assert reference and healing and not reference & healing


def test_the_tiny_text_holds_no_task_format_and_no_held_out_entity():
    from depthprune.tiny.world import World

    rs = rows("tiny")
    assert {r["genre"] for r in rs} == set(build.TINY_MIX)  # not tasks, not commonsense
    text = "\n".join(r["text"] for r in rs)
    assert "Answer format:" not in text and "the correct answer is" not in text
    world = World(build.TINY_WORLD_SEED)
    # first names and species names are unique in the world (surnames are shared between the splits)
    held_out = {p.first for p in world.pool("heldout")} | {s.name for s in world.species_pool("heldout")}
    assert len(held_out) > 300
    assert not held_out & set(re.findall(r"[A-Za-z]+", text))


def test_the_real_text_shares_no_13_gram_with_the_real_profile():
    def words(s):
        return re.findall(r"[^\W_]+", s.lower())

    def grams(ws, n=13):
        return {tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)}

    files = [p for root in (REAL_ASSETS / "data", REAL_ASSETS / "tasks") for p in root.rglob("*")
             if p.suffix in (".json", ".jsonl") and "healing" not in p.parts]
    assert any("mc" in p.parts for p in files) and any(p.name == "calibration_pool.jsonl" for p in files)
    profile = set()
    for f in files:
        for v in json_values(f):
            for s in build.json_strings(v):
                profile |= grams(words(s))
    assert len(profile) > 100_000
    for r in rows("real"):
        for paragraph in r["text"].split("\n\n"):
            assert len(paragraph.split()) >= 8
            assert profile.isdisjoint(grams(words(paragraph))), (r["page"], paragraph[:80])


def test_the_real_text_comes_with_its_licence():
    m = manifest("real")
    licence = build.OUT["real"] / build.HANDBOOK_LICENSE
    assert m["license_sha256"] == hashlib.sha256(licence.read_bytes()).hexdigest()
    assert "License: GPL-2.0+ or CC-BY-SA-3.0" in licence.read_text(encoding="utf-8")
    assert "CC-BY-SA-3.0" in m["license"] and "modified" in m["attribution"]


def test_leaks_finds_a_shared_13_gram_and_a_whole_short_text():
    grams, short = build.real_reference([])
    assert not grams and not short
    grams = build.ngrams(build.words("one two three four five six seven eight nine ten eleven twelve thirteen"))
    short = {8: {"the word that means a formal accusation is"}}
    assert build.leaks("So: One, two, three four five six seven eight nine ten eleven twelve thirteen!", grams, short) \
        == "ngram13"
    assert build.leaks("We say the word that means a formal accusation is indictment.", grams, short) == "short_text"
    assert build.leaks("Nothing shared here at all, only words of another kind.", grams, short) is None


def test_page_text_keeps_prose_and_drops_listings(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(
        '<html><head><title>6.2.\xa0Some Title</title></head><body><ul class="docnav"><li>Prev page link text '
        'that is long enough to count</li></ul><div class="toc"><div class="para">a table of contents entry that '
        'is long enough</div></div><div class="para">The <code class="command">apt</code> tool installs the '
        'packages you ask for, and their dependencies too.<div class="para">A nested paragraph inside the outer '
        'one, also long enough.</div></div><div class="para">Too short to keep.</div><pre class="screen">$ apt '
        'install foo bar baz and many more words here</pre></body></html>', encoding="utf-8")
    title, paragraphs = build.page_text(page)
    assert title == "6.2. Some Title"
    assert paragraphs == ["The apt tool installs the packages you ask for, and their dependencies too.",
                          "A nested paragraph inside the outer one, also long enough."]


@pytest.mark.skipif(not (build.HANDBOOK_HTML / "index.html").is_file(), reason="debian-handbook is not installed")
def test_the_real_text_rebuilds_from_the_installed_handbook():
    if build.package_version(build.HANDBOOK_PACKAGE) != manifest("real")["version"]:
        pytest.skip("another debian-handbook version than the frozen text's")
    rebuilt, drops = build.real_rows()
    assert rebuilt == rows("real")
    assert drops["paragraphs_dropped"] == manifest("real")["disjointness"]["paragraphs_dropped"]


def test_the_real_builder_without_the_handbook_names_the_package(tmp_path):
    with pytest.raises(build.SourceMissing, match="apt-get install debian-handbook"):
        build.handbook_pages(tmp_path)
