"""Byte-level BPE tokenizer for the tiny family, trained on the generated corpus.

Mirrors the Llama-3 tokenizer in the ways that matter to the benchmark: byte-level
BPE (no unknown tokens, exact round trip), digits split one by one, a
``<|begin_of_text|>`` BOS that is prepended to every encoded text (so lm-eval and
the calibration code see the same framing as with Llama-3), an
``<|end_of_text|>`` EOS that separates packed training documents, and a
dedicated ``<|pad|>`` token.  Saved in Hugging Face format
(``tokenizer.json`` + ``tokenizer_config.json``) so that
``AutoTokenizer.from_pretrained(model_dir)`` loads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

BOS, EOS, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"
SPECIALS = [BOS, EOS, PAD]


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096):
    """Train the BPE model; returns a ``tokenizers.Tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                      special_tokens=[(BOS, bos_id)]),
    ])
    return tok


def to_hf(tok, model_max_length: int = 512):
    """Wrap a ``tokenizers.Tokenizer`` as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   model_max_length=model_max_length, padding_side="right",
                                   clean_up_tokenization_spaces=False)


def save(tok, out_dir: str | Path, model_max_length: int = 512):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hf = to_hf(tok, model_max_length)
    hf.save_pretrained(out)
    return hf


def load(path: str | Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))
