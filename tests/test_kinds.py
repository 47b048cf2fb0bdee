"""Every test has a kind (tests/kinds.py): a test file the table does not list fails collection, naming itself
and the table; a kind marks its file's tests, a test's own kind marker wins; markers select, never deselect."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kinds import EXCEPTIONS, KIND_MARKERS, KINDS, TABLE, kind_of, unlisted

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = ["test_*.py", "*_test.py"]


def test_every_test_file_has_a_registered_kind(pytestconfig):
    on_disk = {p.relative_to(ROOT).as_posix() for d in ("tests", "bench") for p in (ROOT / d).rglob("test_*.py")}
    assert not on_disk - set(KINDS), "test files without a kind"
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(KIND_MARKERS) <= registered and set(KINDS.values()) == set(KIND_MARKERS)


def test_every_exception_names_a_test_of_its_file():
    """A pattern that names a function names one its file defines (a renamed test would drop out of it)."""
    for path, patterns in EXCEPTIONS.items():
        source = (ROOT / path).read_text()
        assert path in KINDS and set(patterns.values()) <= set(KIND_MARKERS), path
        for pattern in patterns:
            function = pattern.split("[")[0]
            assert function == "*" or f"def {function}(" in source, (path, pattern)
    assert kind_of("tests/search/test_searchers.py", "test_batches_go_through_score_many[bo]") == "integration"
    assert kind_of("tests/search/test_searchers.py", "test_batches_go_through_score_many[greedy]") == "unit"
    assert kind_of("tests/test_no_such_kind.py", "test_x") is None


def test_unlisted_names_the_file_and_the_table():
    reason = unlisted(ROOT / "tests" / "test_no_such_kind.py", ROOT, PATTERNS)
    assert reason is not None and reason.startswith("tests/test_no_such_kind.py: no kind in ") and TABLE in reason
    assert unlisted(ROOT / "tests" / "test_kinds.py", ROOT, PATTERNS) is None
    assert "tests/speed/test_speed.py" in KINDS  # listed ahead of its branch: a listed file that is absent is no error
    assert unlisted(ROOT / "tests" / "fixtures.py", ROOT, PATTERNS) is None  # no test file
    assert unlisted(Path("/elsewhere/tests/test_x.py"), ROOT, PATTERNS) is None  # not this repository's


def test_collection_marks_kinds_and_refuses_an_unlisted_file(pytester):
    """The root conftest's hooks, on a stand-in repository: a listed unit file's tests are unit unless one carries
    its own kind; -m selects; the longest kinds run first; a new file without a kind stops the run with the reason."""
    pytester.makeconftest(f"""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("root_conftest", {str(ROOT / "conftest.py")!r})
root = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root)
root.ROOT = Path(__file__).resolve().parent
pytest_collect_file = root.pytest_collect_file
pytest_collection_modifyitems = root.pytest_collection_modifyitems
""")
    pytester.mkdir("tests")
    listed = next(path for path, kind in KINDS.items() if kind == "unit" and path.startswith("tests/"))
    pytester.path.joinpath(listed).parent.mkdir(parents=True, exist_ok=True)
    pytester.path.joinpath(listed).write_text(
        "import pytest\n\ndef test_a():\n    pass\n\n@pytest.mark.integration\ndef test_b():\n    pass\n")
    pytester.makeini("[pytest]\naddopts = --strict-markers -p no:cacheprovider\nmarkers =\n"
                     + "".join(f"    {k}: kind\n" for k in KIND_MARKERS))
    pytester.runpytest("-m", "unit").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest("-m", "integration").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest().assert_outcomes(passed=2)
    # handed out longest kinds first (RUN_ORDER): the integration test before the unit test collected ahead of it
    pytester.runpytest("-v").stdout.fnmatch_lines(["*::test_b PASSED*", "*::test_a PASSED*"])
    pytester.path.joinpath("tests", "test_new_kind.py").write_text("def test_c():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"tests/test_new_kind.py: no kind in {TABLE}; add the file with one of *"])
