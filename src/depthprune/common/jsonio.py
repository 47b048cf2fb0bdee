"""JSON and JSON-lines files: one place that reads, writes and diagnoses them.

Why one module: the project's rule is that bad input fails with the file (and the line) named, and
that a reader never sees half a written file. Reading goes through :func:`read_json` /
:func:`read_jsonl`, whose errors are a :class:`JSONFileError` ``<path>[:line]: <what is wrong>``
(cut short, not JSON, not UTF-8) instead of a bare decoder message; a missing file is still the
:class:`FileNotFoundError` it was, for the callers that read absence as "none". Writing goes through
:func:`write_json_atomic` (a temporary file renamed over the target), :func:`write_json` (a plain
write, where a half file is harmless), :func:`write_jsonl` and :func:`append_jsonl`; each takes the
format its files have always had (indent, key order, ASCII escapes), so the bytes do not change.
``.jsonl.xz`` (result archives) and ``.jsonl.gz`` are read and written compressed.
:func:`canonical` is the one spelling of a key or fingerprint (``sort_keys``, no spaces added).

This module imports nothing from depthprune: any module may use it.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
import uuid
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["JSONFileError", "append_jsonl", "canonical", "dumps", "parse_json", "read_json", "read_jsonl",
           "write_json", "write_json_atomic", "write_jsonl"]


class JSONFileError(ValueError):
    """A JSON or JSON-lines file is broken: the message is ``<path>[:line]: <what is wrong>``.

    ``path``, ``problem`` and ``line`` (None for a whole-file JSON) are kept for callers that re-raise
    it as their own kind of error.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = Path(path), problem, line
        super().__init__(f"{path}{'' if line is None else f':{line}'}: {problem}")


#: what is left after the decoder's error where a number or literal was cut (``0.``, ``1e``, ``tru``)
_CUT_TOKEN = re.compile(r"[-+.0-9eEtrufalsn]{1,5}")


def _cut_short(text: str, err: json.JSONDecodeError) -> bool:
    """Whether the decoder ran into the end of ``text`` (a cut copy) rather than into a malformed part."""
    tail = text[err.pos:].rstrip()
    if not tail or err.msg.startswith("Unterminated string"):
        return True
    return (err.msg != "Extra data" and not err.msg.startswith("Expecting property name")
            and _CUT_TOKEN.fullmatch(tail) is not None)


def parse_json(text: str, path: str | os.PathLike[str], line: int | None = None, expected: str = "JSON") -> Any:
    """``text`` (a file's, or line ``line`` of a JSON-lines file) as JSON; a
    :class:`~depthprune.common.jsonio.JSONFileError` naming ``path`` (and ``line``) that says whether it is empty, cut
    short or not JSON at all (``expected``: what the message says the file should hold)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        if not text.strip():
            raise JSONFileError(path, f"empty, expected {expected}", line) from None
        if _cut_short(text, err):
            raise JSONFileError(path, f"truncated: the JSON stops after {len(text)} characters, before it is "
                                "complete (a partial copy or an interrupted write?)", line) from None
        where = f"column {err.colno}" if line is not None else f"line {err.lineno} column {err.colno}"
        raise JSONFileError(path, f"not valid JSON ({err.msg}: {where}), expected {expected}", line) from None


def _read_text(path: Path) -> str:
    """The file's text, decompressed if it ends in ``.xz`` or ``.gz``; OSError (a missing file) passes through."""
    if path.suffix not in (".xz", ".gz"):
        try:
            return path.read_text(encoding="utf-8")  # newlines as text mode reads them
        except UnicodeDecodeError as err:
            raise JSONFileError(path, f"not UTF-8 text ({err.reason} at byte {err.start}), expected JSON") from None
    raw = path.read_bytes()
    if path.suffix == ".xz":
        try:
            raw = lzma.decompress(raw)
        except lzma.LZMAError as err:
            raise JSONFileError(path, f"not a complete xz file ({err}): a partial copy?") from None
    elif path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
            raise JSONFileError(path, f"not a complete gzip file ({err}): a partial copy?") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise JSONFileError(path, f"not UTF-8 text ({err.reason} at byte {err.start}), expected JSON") from None


def read_json(path: str | os.PathLike[str], expected: str = "JSON") -> Any:
    """The JSON in ``path``; a :class:`~depthprune.common.jsonio.JSONFileError` naming it when it is not UTF-8 or not
    (complete) JSON. A missing or unreadable file raises its OSError, as ``open`` does."""
    path = Path(path)
    return parse_json(_read_text(path), path, expected=expected)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """One JSON value per non-blank line of ``path`` (``.xz``/``.gz``: decompressed first); a bad line
    raises a :class:`~depthprune.common.jsonio.JSONFileError` naming the file and the line."""
    path = Path(path)
    return [parse_json(text, path, n) for n, text in enumerate(_read_text(path).splitlines(), 1) if text.strip()]


def dumps(obj: Any, *, indent: int | None = 2, sort_keys: bool = True, ensure_ascii: bool = True,
          default: Callable[[Any], Any] | None = str) -> str:
    """A JSON file's text: ``obj`` as :func:`json.dumps` writes it with these options, and a final newline.
    ``default=str``: a value JSON has no type for (a Path) is written as its ``str``."""
    return json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default) + "\n"


def canonical(obj: Any, default: Callable[[Any], Any] | None = None) -> str:
    """The one spelling of ``obj`` for a key or a fingerprint: sorted keys, one line, no final newline."""
    return json.dumps(obj, sort_keys=True, default=default)


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, synced, then rename it over ``path``: a reader sees
    the old file or the new one, never half of one; a failure leaves the old file whole and no temporary file.
    The temporary file is opened as a plain write opens one (0666 less the process's umask at the time), not
    as :func:`tempfile.mkstemp` does (0600), which left results and archives unreadable to the other users of a
    shared cluster folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2, sort_keys: bool = True,
                      ensure_ascii: bool = True, default: Callable[[Any], Any] | None = str) -> None:
    """Write ``obj`` as JSON (formatted as :func:`~depthprune.common.jsonio.dumps`) so that a reader never sees a
    half-written file: the text is serialised first (an unserialisable ``obj`` leaves the old file as it was),
    written to a temporary file and renamed over ``path`` (rename is atomic). Missing parent folders are made."""
    text = dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default)
    _replace_atomically(Path(path), text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2, sort_keys: bool = True,
               ensure_ascii: bool = True, default: Callable[[Any], Any] | None = str) -> None:
    """Write ``obj`` as JSON (formatted as :func:`~depthprune.common.jsonio.dumps`) in place, for files a half write
    cannot harm (built assets, a summary); :func:`~depthprune.common.jsonio.write_json_atomic` for files another
    process may read or a run resumes from."""
    Path(path).write_text(dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii,
                                default=default), encoding="utf-8")


def _lines(rows: Iterable[Any], sort_keys: bool, ensure_ascii: bool) -> str:
    return "".join(json.dumps(row, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + "\n" for row in rows)


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any], *, sort_keys: bool = False,
                ensure_ascii: bool = True, atomic: bool = False) -> None:
    """One JSON line per row (compact, each ending in a newline). A ``.xz`` path is written xz-compressed
    (preset 9), a ``.gz`` one gzip-compressed (no timestamp, no file name): the bytes are a function of the
    rows. ``atomic``: as :func:`~depthprune.common.jsonio.write_json_atomic`."""
    path = Path(path)
    data = _lines(rows, sort_keys, ensure_ascii).encode("utf-8")
    if path.suffix == ".xz":
        data = lzma.compress(data, preset=9)
    elif path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    if atomic:
        _replace_atomically(path, data)
    else:
        path.write_bytes(data)


def append_jsonl(path: str | os.PathLike[str], row: Any, *, sort_keys: bool = False, ensure_ascii: bool = True,
                 sync: bool = False) -> None:
    """Append ``row`` as one JSON line to ``path`` (made if missing); ``sync``: flushed to disk before it
    returns, so a kill loses at most the line being written (a reader drops a cut last line)."""
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + "\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
