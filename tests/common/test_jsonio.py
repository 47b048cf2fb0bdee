"""depthprune.common.jsonio: round trips, the writers' exact bytes, atomic writes, errors that name the file."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
import stat
from pathlib import Path

import pytest

from depthprune.common import jsonio
from depthprune.common.jsonio import JSONFileError
from depthprune.results.schema import ResultFileError, read_json_file

DATA = {"b": [1, 2.5, None], "a": {"z": "é", "y": True}}


def test_json_round_trip_and_default_format(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.json"
    jsonio.write_json_atomic(path, DATA)  # makes the missing folder
    assert jsonio.read_json(path) == DATA
    # the format it always wrote: indent 2, sorted keys, ASCII escapes, final newline
    assert path.read_text() == json.dumps(DATA, indent=2, sort_keys=True) + "\n"
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary file left


@pytest.mark.parametrize("options", [{}, {"indent": 1, "sort_keys": False, "ensure_ascii": False},
                                     {"indent": 4, "ensure_ascii": False}, {"indent": None}])
def test_writers_keep_each_format(tmp_path: Path, options: dict) -> None:
    expected = json.dumps(DATA, **{"indent": 2, "sort_keys": True, **options}) + "\n"
    assert jsonio.dumps(DATA, **options) == expected
    jsonio.write_json(tmp_path / "plain.json", DATA, **options)
    jsonio.write_json_atomic(tmp_path / "atomic.json", DATA, **options)
    assert (tmp_path / "plain.json").read_bytes() == expected.encode()
    assert (tmp_path / "atomic.json").read_bytes() == expected.encode()


def test_default_str_and_canonical() -> None:
    assert jsonio.dumps({"p": Path("a/b")}, indent=None) == '{"p": "a/b"}\n'
    assert jsonio.canonical({"b": 1, "a": [2, 3]}) == '{"a": [2, 3], "b": 1}'
    with pytest.raises(TypeError):
        jsonio.canonical({"p": Path("a")})
    assert jsonio.canonical({"p": Path("a")}, default=str) == '{"p": "a"}'


def test_failed_write_leaves_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.json"
    jsonio.write_json_atomic(path, DATA)
    before = path.read_bytes()
    with pytest.raises(ValueError):  # not serialisable (a cycle): fails before anything is written
        cyclic: list = []
        cyclic.append(cyclic)
        jsonio.write_json_atomic(path, cyclic)

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)  # fails half way: the temporary file is written, not renamed
    with pytest.raises(OSError, match="disk full"):
        jsonio.write_json_atomic(path, {"new": 1})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


@pytest.mark.parametrize(("text", "problem"), [
    ("", "empty, expected JSON"),
    ('{"a": [1, 2', "truncated: the JSON stops after 11 characters"),
    ('{"a": 1} x', "not valid JSON (Extra data: line 1 column 10), expected JSON"),
])
def test_a_broken_file_is_named(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(JSONFileError, match=re.escape(problem)) as err:
        jsonio.read_json(path)
    assert str(err.value).startswith(f"{path}: ")
    assert err.value.path == path and err.value.line is None


def test_not_utf8_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(JSONFileError, match=re.escape(f"{path}: not UTF-8 text")):
        jsonio.read_json(path)
    with pytest.raises(FileNotFoundError):  # absence stays what it was: callers read it as "none"
        jsonio.read_json(tmp_path / "missing.json")


def test_result_errors_are_json_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "cell.json"
    path.write_text("")
    with pytest.raises(ResultFileError, match="empty, expected a JSON object") as err:
        read_json_file(path)
    assert isinstance(err.value, JSONFileError) and str(err.value) == f"{path}: empty, expected a JSON object"


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.jsonl.xz", "rows.jsonl.gz"])
def test_jsonl_round_trip(tmp_path: Path, name: str) -> None:
    rows = [{"b": 1, "a": "é"}, [1, 2], "x"]
    path = tmp_path / name
    jsonio.write_jsonl(path, rows, sort_keys=True, atomic=True)
    assert jsonio.read_jsonl(path) == rows
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    compress = {"xz": lambda b: lzma.compress(b, preset=9), "gz": lambda b: gzip.compress(b, mtime=0)}
    assert path.read_bytes() == compress.get(name.rsplit(".", 1)[1], lambda b: b)(text)  # the bytes archives have


def test_jsonl_append_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    jsonio.append_jsonl(path, {"b": 1, "a": 2}, sort_keys=True, sync=True)
    jsonio.append_jsonl(path, {"c": "é"}, ensure_ascii=False)
    with path.open("a") as f:
        f.write("\n")
    assert path.read_text(encoding="utf-8") == '{"a": 2, "b": 1}\n{"c": "é"}\n\n'
    assert jsonio.read_jsonl(path) == [{"a": 2, "b": 1}, {"c": "é"}]


def test_jsonl_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(JSONFileError, match=r"rows\.jsonl:2: truncated") as err:
        jsonio.read_jsonl(path)
    assert err.value.line == 2
    xz = tmp_path / "rows.jsonl.xz"
    xz.write_bytes(lzma.compress(b'{"a": 1}\n')[:-8])  # a cut copy
    with pytest.raises(JSONFileError, match=r"rows\.jsonl\.xz: not a complete xz file"):
        jsonio.read_jsonl(xz)


def test_an_atomic_write_gets_the_mode_a_plain_write_gets(tmp_path: Path) -> None:
    """Not mkstemp's 0600: a results folder on a shared cluster disk stays readable to the group (umask)."""
    from depthprune.common.jsonio import write_json_atomic

    plain, atomic = tmp_path / "plain.json", tmp_path / "atomic.json"
    plain.write_text("{}")
    write_json_atomic(atomic, {})
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    write_json_atomic(atomic, {"again": 1})  # replacing keeps it
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
