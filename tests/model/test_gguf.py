"""depthprune.model.gguf's rules, with a tiny model standing in for a GGUF read: a conversion is
read only once complete, an incomplete one is replaced, concurrent openers convert once, the key is the file's
sha256, the switch."""

from __future__ import annotations

import json
import threading
import time

import pytest

from depthprune.model import gguf as gguf_checkpoint
from depthprune.model import load_model


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHPRUNE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "stand-in.gguf"
    path.write_bytes(b"a stand-in for a GGUF file")
    return path


def read_calls():
    calls = []

    def read():
        calls.append(1)
        return load_model("tiny-llama3", device="cpu", dtype="float32")

    return read, calls


def test_converts_once_then_reads(gguf):
    read, calls = read_calls()
    target = gguf_checkpoint.convert("tiny-llama3", gguf, read)
    assert gguf_checkpoint.is_complete(target) and (target / "config.json").is_file() and calls == [1]
    assert json.loads((target / gguf_checkpoint.MARKER).read_text())["dtype"] == "float32"
    assert gguf_checkpoint.convert("tiny-llama3", gguf, read) == target and calls == [1]
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_an_incomplete_conversion_is_replaced_never_read(gguf):
    """A directory without its marker (a writer killed before its rename cannot leave one, but an older
    format or a hand-made copy can) is written again."""
    read, calls = read_calls()
    target = gguf_checkpoint.converted_dir("tiny-llama3", gguf)
    target.mkdir(parents=True)
    (target / "config.json").write_text("{not json")
    assert not gguf_checkpoint.is_complete(target)
    gguf_checkpoint.convert("tiny-llama3", gguf, read)
    assert calls == [1] and gguf_checkpoint.is_complete(target)
    assert json.loads((target / "config.json").read_text())


def test_openers_at_once_convert_once_and_read_the_same(gguf):
    """Two xdist workers opening one model together: the second waits on the lock and reads the first's
    conversion (each thread opens the lock file itself, so they exclude each other as two processes do)."""
    read, calls = read_calls()

    def slow_read():
        time.sleep(0.5)  # both openers are past the first completeness check before either writes
        return read()

    got: list = []
    threads = [threading.Thread(target=lambda: got.append(gguf_checkpoint.convert("tiny-llama3", gguf, slow_read)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and len(got) == 2 and got[0] == got[1] and gguf_checkpoint.is_complete(got[0])


def test_another_file_is_another_conversion(gguf):
    first = gguf_checkpoint.converted_dir("tiny-llama3", gguf)
    gguf.write_bytes(b"other bytes")
    assert gguf_checkpoint.converted_dir("tiny-llama3", gguf) != first


def test_only_float32_is_converted(gguf):
    with pytest.raises(RuntimeError, match="must be float32"):
        gguf_checkpoint.convert("tiny-llama3", gguf, lambda: load_model("tiny-llama3", device="cpu", dtype="bfloat16"))


def test_the_switch_takes_on_and_off_only(monkeypatch):
    monkeypatch.setenv(gguf_checkpoint.ENV, "maybe")
    with pytest.raises(ValueError, match="DEPTHPRUNE_GGUF_CACHE='maybe'.*'on' and 'off'"):
        gguf_checkpoint.enabled()
    monkeypatch.setenv(gguf_checkpoint.ENV, "off")
    assert not gguf_checkpoint.enabled()
