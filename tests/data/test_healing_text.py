"""data/healing_text.py: the frozen healing texts are read after their sha256 is checked; a missing or corrupt
file, or an unreachable Hub dataset, is an InputError naming it; DEPTHPRUNE_HEALING_DATA replaces them."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from depthprune.common import jsonio
from depthprune.common.errors import InputError
from depthprune.data import healing_text as ht
from depthprune.data.sources import DataUnavailable


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    monkeypatch.delenv(ht.ENV, raising=False)


@pytest.fixture
def tiny_copy(tmp_path, monkeypatch):
    """The tiny healing folder copied to ``tmp_path``, which the reader then reads."""
    folder = tmp_path / "healing"
    shutil.copytree(ht.FROZEN["tiny"], folder)
    monkeypatch.setitem(ht.FROZEN, "tiny", folder)
    return folder


@pytest.mark.parametrize("profile", ["tiny", "real"])
def test_the_frozen_texts_read_and_fingerprint(profile):
    texts = ht.healing_texts(profile)
    manifest = jsonio.read_json(ht.FROZEN[profile] / ht.MANIFEST)
    assert len(texts) == manifest["rows"] and all(isinstance(t, str) and t for t in texts)
    assert sum(len(t) for t in texts) == manifest["characters"]
    fp = ht.healing_fingerprint(profile)
    assert fp["sha256"] == manifest["sha256"] == hashlib.sha256((ht.FROZEN[profile] / ht.TRAIN).read_bytes()).hexdigest()
    assert fp["rows"] == len(texts) and fp["source"] and fp["version"]
    json.dumps(fp)  # recordable in a result


def test_a_corrupt_file_names_itself_and_the_rebuild(tiny_copy):
    path = tiny_copy / ht.TRAIN
    data = bytearray(path.read_bytes())
    data[100] = ord("X") if data[100] != ord("X") else ord("Y")  # one byte changed, still JSON text
    path.write_bytes(bytes(data))
    for read in (ht.healing_texts, ht.healing_fingerprint):
        with pytest.raises(ht.HealingDataUnavailable, match="corrupt") as err:
            read("tiny")
        assert str(path) in str(err.value) and "depthprune build healing tiny" in str(err.value)
        assert isinstance(err.value, InputError)


def test_a_missing_file_names_itself(tiny_copy):
    (tiny_copy / ht.TRAIN).unlink()
    with pytest.raises(ht.HealingDataUnavailable, match="missing") as err:
        ht.healing_texts("tiny")
    assert str(tiny_copy / ht.TRAIN) in str(err.value) and "depthprune build healing tiny" in str(err.value)


def test_a_missing_or_broken_manifest_names_itself(tiny_copy):
    manifest = tiny_copy / ht.MANIFEST
    manifest.write_text('{"sha256": "ab', encoding="utf-8")
    with pytest.raises(ht.HealingDataUnavailable, match="cannot be read") as err:
        ht.healing_texts("tiny")
    assert str(manifest) in str(err.value)
    manifest.unlink()
    with pytest.raises(ht.HealingDataUnavailable, match="missing") as err:
        ht.healing_fingerprint("tiny")
    assert str(manifest) in str(err.value)


def test_the_environment_replaces_the_text(tmp_path, monkeypatch):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"text": "one"}\n{"text": "two", "extra": 1}\n', encoding="utf-8")
    monkeypatch.setenv(ht.ENV, str(path))
    assert ht.healing_texts("tiny") == ht.healing_texts("real") == ["one", "two"]
    fp = ht.healing_fingerprint("real")
    assert fp == {"source": "user file", "path": str(path), "version": None,
                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows": 2}
    path.write_text('{"text": "one"}\n{"body": "two"}\n', encoding="utf-8")
    with pytest.raises(ht.HealingDataUnavailable, match=r"row 2 has no 'text'") as err:
        ht.healing_texts("tiny")
    assert str(path) in str(err.value)
    monkeypatch.setenv(ht.ENV, str(tmp_path / "absent.jsonl"))
    with pytest.raises(ht.HealingDataUnavailable, match="absent.jsonl is missing"):
        ht.healing_texts("tiny")


def test_an_unknown_profile_is_bad_input():
    with pytest.raises(InputError, match="allowed: tiny, real, paper"):
        ht.healing_texts("nope")


def test_the_paper_text_offline_says_what_to_do(monkeypatch):
    def offline(source):
        raise DataUnavailable(f"cannot load {source.describe()}: no network")

    monkeypatch.setattr(ht, "instruction_texts", offline)
    ht._paper_texts.cache_clear()
    try:
        with pytest.raises(ht.HealingDataUnavailable, match=r"yahma/alpaca-cleaned.*no network.*DEPTHPRUNE_HEALING_DATA"):
            ht.healing_texts("paper")
    finally:
        ht._paper_texts.cache_clear()
