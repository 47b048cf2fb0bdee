from __future__ import annotations

import pytest

from tests.fixtures import random_text, write_jsonl, write_model_dir


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    return write_model_dir(tmp_path_factory.mktemp("llama"), "llama", n_layers=6)


@pytest.fixture(scope="session")
def text_file(tmp_path_factory):
    """A C4-like JSONL file of random-word documents longer than 64 characters."""
    return write_jsonl(tmp_path_factory.mktemp("data") / "train.jsonl", random_text(40, 40))
