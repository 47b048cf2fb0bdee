"""Model loading: a registry id, a local directory or a Hub id -> ``(model, tokenizer)``.

:func:`load_model` loads ``(model, tokenizer)`` for a registry id, a local directory or a Hub id.
These are sometimes *different weights under one id* (a GGUF shipped by a package, or the Hub
checkpoint); the result identity's ``weights`` fingerprint (:mod:`depthprune.model.weights`, over the one
GGUF file or over the checkpoint's weight files) tells them apart. A GGUF is loaded with
transformers' GGUF reader (the ``gguf`` package, extra ``depthprune[real]``), dequantised to the
run's dtype, and its quantisation marker is dropped, so the loaded model is a plain dense model
that ``save_pretrained`` writes as a standard safetensors checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from depthprune.model import gguf as gguf_checkpoint
from depthprune.model.files import (
    gguf_file_in,
    locate,
)
from depthprune.model.registry import (
    BOS_EVERY_WINDOW,
    ModelSpec,
    resolve,
)


def resolve_dtype(dtype: str | torch.dtype, device: str, announce: bool = False) -> torch.dtype:
    """``auto`` means bf16 on CUDA (the paper's setting) and, on a CPU, bf16 only where bf16
    matmuls run on AMX, else fp32 (:mod:`depthprune.model.precision` asks the machine)."""
    from depthprune.model.precision import resolve_dtype as resolve

    return resolve(dtype, device, announce=announce)


def resolve_device(device: str | None) -> str:
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"unknown device {device!r}; allowed: auto, cpu, cuda, cuda:N")
    return device


def load_model(
    model: str | ModelSpec,
    device: str | None = "auto",
    dtype: str | torch.dtype = "auto",
    allow_download: bool = False,
    attn_implementation: str = "sdpa",
):
    """Load ``(model, tokenizer)`` in eval mode on ``device``; see :func:`~depthprune.model.files.locate`.

    Some architectures have no path for the requested attention implementation (Gemma-2
    and BLOOM have no SDPA path, and transformers refuses to load them with ``"sdpa"``).
    The model class is asked first (its ``_supports_sdpa`` / ``_supports_flex_attn`` /
    ``_supports_flash_attn`` flag); only when it says no is another implementation it
    supports used (``"sdpa"`` if it has that, else ``"eager"``), with a warning naming the
    class and the fallback. Any other failure propagates. The implementation actually
    used is ``model.config._attn_implementation``.
    """
    spec = resolve(model)
    path = locate(spec, allow_download=allow_download)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev, announce=True)
    gguf = gguf_file_in(spec, path)
    if gguf and gguf_checkpoint.enabled():  # read once, then from its dense conversion (gguf_checkpoint)
        converted = gguf_checkpoint.convert(
            spec.id, Path(path) / gguf, lambda: _load(spec, path, gguf, "cpu", torch.float32, attn_implementation))
        hf_model, tokenizer = _load(spec, str(converted), None, dev, torch_dtype, attn_implementation)
    else:
        hf_model, tokenizer = _load(spec, path, gguf, dev, torch_dtype, attn_implementation)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if spec.bos_every_window:
        setattr(tokenizer, BOS_EVERY_WINDOW, True)
    return hf_model, tokenizer


def _load(spec: ModelSpec, path: str, gguf: str | None, dev: str, torch_dtype: torch.dtype, attn_implementation: str):
    """``(model, tokenizer)`` of the checkpoint at ``path`` (``gguf``: the GGUF file in it, read dequantised),
    as transformers loads them: :func:`load_model`'s docstring, before its tokenizer settings."""
    import warnings

    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig, AutoModelForCausalLM, AutoTokenizer

    extra = {"gguf_file": gguf} if gguf else {}
    config = None
    if gguf:
        # A GGUF's config is its metadata, which transformers' reader parses in full (every vocabulary
        # entry) for the architectures its fast reader does not cover -- ~10 s at Gemma-3's 262k tokens,
        # and AutoTokenizer, AutoConfig and from_pretrained would each parse it again. Parse it once:
        # the tokenizer class comes from the config's model type, the model from the config.
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

        config = AutoConfig.from_pretrained(path, revision=spec.revision, **extra)
        typed = {"tokenizer_type": config.model_type} if TOKENIZER_MAPPING_NAMES.get(config.model_type) else {}
        tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision, **extra, **typed)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision, **extra)

    attn = attn_implementation
    flag = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}.get(attn) if isinstance(attn, str) else None
    if isinstance(attn, str) and attn.startswith("flash_attention"):
        flag = "_supports_flash_attn"
    if flag is not None:
        config = config or AutoConfig.from_pretrained(path, revision=spec.revision, **extra)
        # The class AutoModelForCausalLM will build; an unknown config is left to it to report.
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)] if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING else None
        if isinstance(cls, (list, tuple)):
            named = [c for c in cls if c.__name__ in (getattr(config, "architectures", None) or [])]
            cls = (named or list(cls))[0]
        # Only an explicit False is "unsupported"; a class without the flag is tried as asked.
        if cls is not None and getattr(cls, flag, None) is False:
            attn = "sdpa" if attn != "sdpa" and getattr(cls, "_supports_sdpa", False) else "eager"
            warnings.warn(
                f"{cls.__name__} does not support attn_implementation={attn_implementation!r}; "
                f"loading it with attn_implementation={attn!r} instead",
                UserWarning,
                stacklevel=3,
            )
    hf_model = AutoModelForCausalLM.from_pretrained(
        path, revision=spec.revision, dtype=torch_dtype, attn_implementation=attn, **_gguf_kwargs(gguf),
        **({"config": config} if gguf else {}),
    )
    if gguf:
        _drop_gguf_quantizer(hf_model, gguf)
    hf_model.to(dev)
    hf_model.eval()
    return hf_model, tokenizer


def _gguf_kwargs(gguf: str | None) -> dict:
    """``from_pretrained`` arguments that load a GGUF *dequantised* (dense tensors in the
    requested dtype), also where transformers could keep the blocks packed."""
    if not gguf:
        return {}
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers: GGUF files are always dequantised
        return {"gguf_file": gguf}
    return {"gguf_file": gguf, "quantization_config": GgufConfig(gguf_file=gguf, dequantize=True)}


def _drop_gguf_quantizer(model, gguf: str) -> None:
    """After a dequantising GGUF load the weights are plain tensors, but transformers still
    marks the model quantised (and refuses ``save_pretrained``). Check that no packed module
    is left, then remove the marker, so the model is the dense model it is."""
    packed = [name for name, mod in model.named_modules() if "gguf" in type(mod).__name__.lower()]
    if packed:
        raise RuntimeError(f"{gguf}: {len(packed)} modules are still packed GGUF (e.g. {packed[0]}); "
                           "expected a dequantised load")
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            delattr(model, attr)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.config.depthprune_source_gguf = gguf  # recorded in a saved checkpoint's config


def read_config(model: str | ModelSpec, allow_download: bool = False) -> Any:
    """The model's transformers config without its weights: its ``config.json``, or a GGUF's metadata.

    For the checks a command makes before it loads anything (a heal's target modules, the layer count).
    The config of a multimodal checkpoint is its text model's.
    """
    from transformers import AutoConfig

    spec = resolve(model)
    path = locate(spec, allow_download=allow_download)
    gguf = gguf_file_in(spec, path)
    if gguf and gguf_checkpoint.enabled():  # its dense conversion's config.json, once made: the GGUF's tokenizer
        converted = gguf_checkpoint.converted_dir(spec.id, Path(path) / gguf)  # metadata takes seconds to parse
        if gguf_checkpoint.is_complete(converted):
            path, gguf = str(converted), None
    config = AutoConfig.from_pretrained(path, **({"gguf_file": gguf} if gguf else {}))
    return getattr(config, "text_config", None) or config


def block_linear_kinds(config: Any) -> list[str]:
    """The last name parts of the linear layers in the decoder blocks (``q_proj``, ``down_proj``...) of the
    architecture ``config`` describes, from a model built on the meta device (no memory, no weights)."""
    from transformers import AutoModelForCausalLM

    from depthprune.model.decoder_layers import find_decoder_layers

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    kinds = set()
    for block in find_decoder_layers(skeleton).layers:
        for name, module in block.named_modules():
            if isinstance(module, torch.nn.Linear):
                kinds.add(name.rsplit(".", 1)[-1])
    return sorted(kinds)
