"""lm-eval's environment report, collected once per process and working directory instead of once per evaluation.

lm-eval's ``simple_evaluate`` ends every run with ``add_env_info(results)``: torch's ``collect_env`` report,
which starts ``python -m pip list`` and a dozen other subprocesses, and the git commit above the working
directory. That is ~0.7 s an evaluation on a 2-core CPU whatever the model, and the test suite evaluates 62
times: 44 s of its two workers' ~1,100 (docs/measurements.md, "lm-eval's environment report"). Nothing that
report reads changes while one process runs in one directory, and the suite never reads it (a result records
its own environment: :mod:`depthprune.results.provenance`); lm-eval's output still carries it, the same keys and
values. :func:`env_report_once` puts in, for the length of one evaluation, a function that makes lm-eval's
report once per process and working directory (its git commit is read relative to it) and copies it into each
result, then puts lm-eval's own back. An lm-eval whose ``add_env_info`` is not the ``(storage)`` this was
written for runs unchanged, only slower.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from depthprune.evaluation.replacing import has_function

#: the signature of lm-eval's function that this one stands in for (lm-eval 0.4.8 to 0.4.13 at least)
_EXPECTED_PARAMETERS = ("storage",)

#: working directory -> the keys and values lm-eval's report added, for this process
_REPORTS: dict[str, dict[str, Any]] = {}


@contextmanager
def env_report_once() -> Iterator[None]:
    """Within the block, lm-eval's environment report is made once per process and working directory, and each
    evaluation's result gets a copy of it. lm-eval is left untouched where its ``add_env_info`` is not the expected one."""
    from lm_eval import evaluator

    if not has_function(evaluator, "add_env_info", _EXPECTED_PARAMETERS):
        yield
        return
    original: Callable[[dict[str, Any]], None] = evaluator.add_env_info

    def add_env_info(storage: dict[str, Any]) -> None:
        where = os.getcwd()
        if where not in _REPORTS:
            report: dict[str, Any] = {}
            original(report)
            _REPORTS[where] = report
        storage.update(copy.deepcopy(_REPORTS[where]))

    evaluator.add_env_info = add_env_info
    try:
        yield
    finally:
        evaluator.add_env_info = original
