"""The model room: everything that knows what a model is, below every objective, searcher and evaluation.

* :mod:`~depthprune.model.loading` -- :func:`load_model`: a registry id, a local directory or a Hub id;
* :mod:`~depthprune.model.registry` -- the models the benchmark knows by id (:class:`ModelSpec`, :func:`resolve`);
* :mod:`~depthprune.model.files` -- where a model's weights are on this machine;
* :mod:`~depthprune.model.gguf` -- a shipped GGUF converted once into a dense checkpoint;
* :mod:`~depthprune.model.weights` -- the weights' fingerprint a result records;
* :mod:`~depthprune.model.decoder_layers` -- where a decoder keeps its blocks, found without model names;
* :mod:`~depthprune.model.masking` -- the one reversible layer-removal mechanism;
* :mod:`~depthprune.model.output_head` -- hidden states to log-probabilities, a chunk at a time;
* :mod:`~depthprune.model.precision` -- which precision a run uses and what the CPU's libraries run;
* :mod:`~depthprune.model.kernel_identity` -- the kernels' fingerprint a result records.

This module names the loading API; the others are imported by their own paths.
"""

from depthprune.model.decoder_layers import DecoderLayers, find_decoder_layers, find_final_norm
from depthprune.model.files import (
    STAND_IN_MARKER,
    assembled_dir,
    cache_root,
    gguf_file_in,
    is_stand_in,
    locate,
    package_dir,
    weights_file_in,
)
from depthprune.model.loading import load_model, resolve_device, resolve_dtype
from depthprune.model.registry import (
    BOS_EVERY_WINDOW,
    MODELS,
    PAPER_MODELS,
    REAL_ASSETS,
    REAL_MODELS,
    TINY_ASSETS,
    TINY_MODELS,
    DataProfile,
    ModelSpec,
    Shape,
    WeightsUnavailable,
    resolve,
)

__all__ = ["BOS_EVERY_WINDOW", "MODELS", "PAPER_MODELS", "REAL_ASSETS", "REAL_MODELS", "STAND_IN_MARKER",
           "TINY_ASSETS", "TINY_MODELS", "DataProfile", "DecoderLayers", "ModelSpec", "Shape",
           "WeightsUnavailable", "assembled_dir", "cache_root", "find_decoder_layers", "find_final_norm", "gguf_file_in", "is_stand_in",
           "load_model", "locate", "package_dir", "resolve", "resolve_device", "resolve_dtype", "weights_file_in"]
