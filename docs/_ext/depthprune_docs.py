"""Sphinx extension of depthprune's docs: pages generated from the code, so they cannot drift.

Directives (used in ``docs/formats.md``):

``{result-schema}``
    The result schema (:mod:`depthprune.results.schema`): its version, the required top-level and cost
    fields and the identity's fields with their types and comments, read from the source.
``{reference-schema}``
    A reference's keys (:func:`depthprune.grid.reference.make_reference` and
    ``write_public_references``) and the tolerances of a case file's ``[tolerance]``
    (:class:`depthprune.grid.cases.Tolerance`: fields, defaults, comments).
``{json-excerpt} PATH``
    A committed JSON file, or a member of a committed ``archive/<grid>.jsonl.xz`` (``:member:``),
    shown with long lists and strings shortened.

Everything is read with :mod:`ast` and :mod:`tokenize`, never imported: the docs build needs
neither torch nor the package installed (``tox -e docs``).

It also patches, at build time, the few docstrings under ``src/depthprune/report/`` that do not
render as reStructuredText (that package is not edited from the docs work); each patch that no
longer applies is reported as a warning, so the build fails until the patch is deleted.
"""

from __future__ import annotations

import ast
import io
import json
import lzma
import tokenize
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "depthprune"
LOGGER = logging.getLogger(__name__)


# -- reading the source ------------------------------------------------------------------------


def _module(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _comments(path: Path) -> tuple[dict[int, str], dict[int, str]]:
    """Line number -> the text of the comment (without ``#``, ``#:``): those at the end of a line
    of code, and those that are a line of their own."""
    trailing, standalone = {}, {}
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.COMMENT:
                text = tok.string.lstrip("#").lstrip(":").strip()
                (standalone if tok.line.lstrip().startswith("#") else trailing)[tok.start[0]] = text
    return trailing, standalone


def _constant(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return ast.literal_eval(node.value)
    raise LookupError(f"no constant {name} in the module")


def _definition(tree: ast.Module, name: str) -> ast.ClassDef | ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
    raise LookupError(f"no class or function {name} in the module")


def dataclass_fields(path: Path, cls: str) -> list[tuple[str, str, str, str]]:
    """(name, annotation, default, comment) of each annotated field of class ``cls``; the comment
    is the one at the end of the field's line, else the ``#:`` lines right above it."""
    tree, (trailing, standalone) = _module(path), _comments(path)
    rows = []
    for node in _definition(tree, cls).body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        annotation = ast.unparse(node.annotation)
        if annotation.startswith("ClassVar"):
            continue
        default = ast.unparse(node.value) if node.value is not None else ""
        comment = trailing.get(node.lineno, "")
        line, above = node.lineno - 1, []
        while not comment and line in standalone:
            above.insert(0, standalone[line])
            line -= 1
        rows.append((node.target.id, annotation, default, comment or " ".join(above)))
    return rows


def returned_dict_keys(path: Path, function: str, variable: str | None = None) -> list[tuple[str, list[str]]]:
    """Keys of the dict literal ``function`` returns (or assigns to ``variable``), each with the keys
    of a dict literal value."""
    func = _definition(_module(path), function)
    for node in ast.walk(func):
        value = None
        if variable is None and isinstance(node, ast.Return):
            value = node.value
        elif variable is not None and isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == variable for t in node.targets):
            value = node.value
        if isinstance(value, ast.Dict):
            out = []
            for key, val in zip(value.keys, value.values):
                if isinstance(key, ast.Constant):
                    inner = [k.value for k in val.keys if isinstance(k, ast.Constant)] if isinstance(val, ast.Dict) else []
                    out.append((key.value, inner))
            return out
    raise LookupError(f"{function} returns no dict literal")


# -- docutils helpers --------------------------------------------------------------------------


def _cell(content: str | nodes.Node, code: bool = False) -> nodes.entry:
    entry = nodes.entry()
    if isinstance(content, nodes.Node):
        entry += content
    else:
        para = nodes.paragraph()
        para += nodes.literal(text=content) if code else nodes.Text(content)
        entry += para
    return entry


def table(headers: list[str], rows: list[list[str]], code_columns: tuple[int, ...] = (0,)) -> nodes.table:
    tab = nodes.table()
    group = nodes.tgroup(cols=len(headers))
    tab += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    row = nodes.row()
    for h in headers:
        row += _cell(h)
    head += row
    group += head
    body = nodes.tbody()
    for values in rows:
        row = nodes.row()
        for i, value in enumerate(values):
            row += _cell(value, code=i in code_columns and bool(value))
        body += row
    group += body
    return tab


def paragraph(*parts: str | nodes.Node) -> nodes.paragraph:
    """Text with ``code`` spans: a part written as ``"`x`"`` becomes a literal."""
    para = nodes.paragraph()
    for part in parts:
        if isinstance(part, nodes.Node):
            para += part
        elif part.startswith("`") and part.endswith("`"):
            para += nodes.literal(text=part[1:-1])
        else:
            para += nodes.Text(part)
    return para


def _code_list(values: list[str]) -> nodes.paragraph:
    parts: list[str] = []
    for i, v in enumerate(values):
        parts += ([", "] if i else []) + [f"`{v}`"]
    return paragraph(*parts)


# -- directives --------------------------------------------------------------------------------


def docstring_block(tree: ast.Module, heading: str) -> str:
    """The indented block that follows the module docstring's line starting with ``heading``."""
    lines = (ast.get_docstring(tree) or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise LookupError(f"the module docstring has no line starting with {heading!r}")
    block: list[str] = []
    for line in lines[start + 1:]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    text = "\n".join(block).strip("\n")
    indent = min(len(line) - len(line.lstrip()) for line in text.splitlines() if line.strip())
    return "\n".join(line[indent:] for line in text.splitlines())


def _literal(text: str, language: str = "text") -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = language
    return block


class ResultSchema(SphinxDirective):
    """The result schema, from ``src/depthprune/results/schema.py`` (and how cost is counted, from
    ``recipe.COUNTING``)."""

    def run(self) -> list[nodes.Node]:
        path, recipe = SRC / "results" / "schema.py", SRC / "recipe.py"
        for p in (path, recipe):
            self.env.note_dependency(str(p))
        tree = _module(path)
        return [
            paragraph("Schema version: ", f"`{_constant(tree, 'SCHEMA')}`",
                      " (a reader refuses any other: ", "`depthprune.results.schema.validate`", ")."),
            paragraph("The top-level fields, as ", "`depthprune.results.schema`", " lists them (", "`*`",
                      " = only meaningful when ", "`evaluated`", "):"),
            _literal(docstring_block(tree, "Top-level fields")),
            paragraph("Required top-level fields (a reader refuses a file without one):"),
            _code_list(list(_constant(tree, "REQUIRED_FIELDS"))),
            paragraph("Required fields of ", "`cost`", ":"), _code_list(list(_constant(tree, "COST_FIELDS"))),
            paragraph("How ", "`cost`", " is counted (", "`cost.counting`", ", written into every result):"),
            nodes.block_quote("", paragraph(_constant(_module(recipe), "COUNTING"))),
            paragraph("The ", "`identity`", " object has exactly these fields (a reader reads them as ",
                      "`r.identity.<field>`", ", never at the top level):"),
            table(["field", "type", "what it is"], [[n, a, c] for n, a, _, c in dataclass_fields(path, "Identity")],
                  code_columns=(0, 1)),
        ]


class ReferenceSchema(SphinxDirective):
    """A reference's keys and the tolerances, from ``grid/reference.py`` and ``grid/cases.py``."""

    def run(self) -> list[nodes.Node]:
        ref, cases = SRC / "grid" / "reference.py", SRC / "grid" / "cases.py"
        for p in (ref, cases):
            self.env.note_dependency(str(p))
        tree = _module(ref)
        measured = returned_dict_keys(ref, "make_reference")
        public = returned_dict_keys(ref, "write_public_references", variable="ref")

        def rows(keys: list[tuple[str, list[str]]]) -> list[list[str]]:
            return [[k, ", ".join(inner)] for k, inner in keys]

        return [
            paragraph("A ", "`measured`", " reference (", "`make_reference`", "), written to ",
                      "`reference/<dtype>/<cell>.json`", ":"),
            table(["key", "its keys"], rows(measured), code_columns=(0, 1)),
            paragraph("A ", "`public-source`", " reference (", "`write_public_references`", "), written to ",
                      "`reference/<cell>.json`", ":"),
            table(["key", "its keys"], rows(public), code_columns=(0, 1)),
            paragraph("Metrics whose names end in ", *sum(([", " if i else "", f"`{s}`"] for i, s in
                      enumerate(_constant(tree, "ACCURACY_SUFFIXES"))), []),
                      " (and ", "`avg_acc`", ") are held to ", "`accuracy_abs`", "; every other metric to ",
                      "`perplexity_rel`", ". The tolerances (a case file's ", "`[tolerance]`", " table, ",
                      "`Tolerance`", "), with their defaults:"),
            table(["field", "default", "what it bounds"],
                  [[n, d, c] for n, _, d, c in dataclass_fields(cases, "Tolerance")], code_columns=(0, 1)),
        ]


def _shorten(value: Any, items: int, chars: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= chars else f"{value[:chars]}… ({len(value)} characters)"
    if isinstance(value, list):
        head = [_shorten(v, items, chars) for v in value[:items]]
        return head + ([f"… {len(value) - items} more"] if len(value) > items else [])
    if isinstance(value, dict):
        return {k: _shorten(v, items, chars) for k, v in value.items()}
    return value


class JsonExcerpt(SphinxDirective):
    """A committed JSON file (or archive member), shortened; ``:collapse:`` keys shown as ``{…}``."""

    required_arguments = 1
    option_spec = {"member": directives.unchanged, "collapse": directives.unchanged,
                   "items": directives.nonnegative_int, "chars": directives.nonnegative_int}

    def run(self) -> list[nodes.Node]:
        path = ROOT / self.arguments[0]
        self.env.note_dependency(str(path))
        member = self.options.get("member")
        if member:
            with lzma.open(path, "rt", encoding="utf-8") as f:
                found = [r["data"] for r in map(json.loads, f) if r.get("name") == member]
            if not found:
                raise self.error(f"{self.arguments[0]} holds no member {member!r}")
            data = found[0]
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
        collapse = {k.strip() for k in self.options.get("collapse", "").split(",") if k.strip()}
        missing = collapse - set(data)
        if missing:
            raise self.error(f"{self.arguments[0]}: no key(s) {', '.join(sorted(missing))} to collapse")
        shown = {k: (f"{{… {len(v)} keys}}" if k in collapse and isinstance(v, dict) else
                     _shorten(v, self.options.get("items", 3), self.options.get("chars", 72)))
                 for k, v in data.items()}
        return [_literal(json.dumps(shown, indent=2, ensure_ascii=False), "json")]


# -- docstrings of src/depthprune/report/ that do not render -----------------------------------

#: object name, as autoapi names it (a module by its dotted path, a function by its own name) ->
#: (text, replacement) in its docstring. Remove an entry when the docstring is fixed (the build
#: warns, and so fails, when a replacement finds nothing to replace).
REPORT_DOCSTRING_FIXES: dict[str, list[tuple[str, str]]] = {}  # none left: report/ docstrings render
_applied: set[tuple[str, str]] = set()


def _fix_report_docstrings(app, what, name, obj, options, lines: list[str]) -> None:
    for old, new in REPORT_DOCSTRING_FIXES.get(name, []):
        for i, line in enumerate(lines):
            if old in line:
                lines[i] = line.replace(old, new)
                _applied.add((name, old))


def _check_report_fixes(app, exception) -> None:
    if exception is not None:
        return
    for name, fixes in REPORT_DOCSTRING_FIXES.items():
        for old, _ in fixes:
            if (name, old) not in _applied:
                LOGGER.warning(f"docs/_ext/depthprune_docs.py: the docstring of {name} no longer contains "
                               f"{old!r}; delete that entry of REPORT_DOCSTRING_FIXES")


def _skip_member(app, what, name, obj, skip, options) -> bool | None:
    """Leave out module constants whose value is Python source with its own docstrings (e.g.
    ``tiny.fixtures.UTILS_PY``): autoapi shows a value as Python, and such a value is not."""
    if what == "data" and isinstance(getattr(obj, "value", None), str) and '"""' in obj.value:
        return True
    return None


def _napoleon_for_definitions(app, what, name, obj, options, lines: list[str]) -> None:
    """napoleon for modules, classes and functions only: the searchers document their
    hyper-parameters in Google-style ``Attributes:`` sections, but on an attribute's or a property's
    docstring napoleon reads a first line ``X: Y`` as "of type X" (``The interval excludes 0: ...``)."""
    from sphinx.ext import napoleon

    if what in ("module", "package", "class", "exception", "function", "method"):
        napoleon._process_docstring(app, what, name, obj, options, lines)


#: the generated API pages' folder (conf.py's autoapi_root)
API_ROOT = "api/"


def _api_pages_out_of_the_sidebar(app, env) -> None:
    """The sidebar lists the API's index page, not the ~170 module pages under it: furo renders the whole
    site's navigation into every page, and with every module in it that took 44% of the docs build
    (py-spy, 2026-12-06: ~47 of 107 s of one core, beside CI's tests). The index page still lists every
    module, and each module page links its members; only the sidebar's tree stops at the API's index.
    Run after the consistency check (``env-check-consistency``), which still sees every page in a toctree."""
    from sphinx import addnodes

    for docname, toc in env.tocs.items():
        if docname.startswith(API_ROOT):
            for node in list(toc.findall(addnodes.toctree)):
                node.parent.remove(node)


def setup(app) -> dict[str, Any]:
    from sphinx.ext import napoleon

    app.setup_extension("sphinx.ext.napoleon")
    for listener in list(app.events.listeners["autodoc-process-docstring"]):
        if listener.handler is napoleon._process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _napoleon_for_definitions)
    app.add_directive("result-schema", ResultSchema)
    app.add_directive("reference-schema", ReferenceSchema)
    app.add_directive("json-excerpt", JsonExcerpt)
    app.connect("autodoc-process-docstring", _fix_report_docstrings)
    app.connect("build-finished", _check_report_fixes)
    app.connect("autoapi-skip-member", _skip_member)
    app.connect("env-check-consistency", _api_pages_out_of_the_sidebar)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
