"""lm-eval's environment report made once per process and working directory (depthprune.evaluation.env_report):
the same keys and values as lm-eval's own, its own function run once for two evaluations, and put back."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval")

from lm_eval import evaluator  # noqa: E402

from depthprune.evaluation import env_report  # noqa: E402
from depthprune.evaluation.env_report import env_report_once  # noqa: E402


@pytest.fixture
def counted(monkeypatch):
    """lm-eval's own ``add_env_info``, counting its runs; no report kept from an earlier test."""
    runs: list[str] = []
    original = evaluator.add_env_info

    def add_env_info(storage):
        runs.append("run")
        original(storage)

    monkeypatch.setattr(evaluator, "add_env_info", add_env_info)
    monkeypatch.setattr(env_report, "_REPORTS", {})
    return runs


def test_two_evaluations_get_lm_evals_own_report_made_once(counted):
    stock: dict = {}
    evaluator.add_env_info(stock)
    assert counted == ["run"] and {"pretty_env_info", "lm_eval_version", "transformers_version"} <= set(stock)
    counted.clear()
    first, second = {"results": 1}, {"results": 2}
    with env_report_once():
        evaluator.add_env_info(first)
        evaluator.add_env_info(second)
    assert counted == ["run"]  # once, for both
    assert first == {"results": 1, **stock} and second == {"results": 2, **stock}
    first["pretty_env_info"] = "changed"  # each result owns its copy
    assert second["pretty_env_info"] == stock["pretty_env_info"]


def test_another_working_directory_gets_its_own_report(counted, tmp_path, monkeypatch):
    with env_report_once():
        evaluator.add_env_info({})
        monkeypatch.chdir(tmp_path)  # lm-eval reads the git commit above the working directory
        evaluator.add_env_info({})
        evaluator.add_env_info({})
    assert counted == ["run", "run"]


def test_lm_eval_gets_its_own_function_back_even_after_an_error(counted):
    original = evaluator.add_env_info
    with pytest.raises(RuntimeError):
        with env_report_once():
            assert evaluator.add_env_info is not original
            raise RuntimeError
    assert evaluator.add_env_info is original


def test_an_lm_eval_with_another_add_env_info_is_left_alone(monkeypatch):
    def add_env_info(storage, extra=None):  # not the (storage) this was written for
        storage["stock"] = True

    monkeypatch.setattr(evaluator, "add_env_info", add_env_info)
    with env_report_once():
        assert evaluator.add_env_info is add_env_info
