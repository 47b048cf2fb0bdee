"""A rehearsal of the paper grid: its cells, on CPU and offline, against stand-ins built by code.

The paper grid (``cases/paper.toml``) needs three 8B checkpoints, C4, WikiText-2,
Commonsense-170k and lm-eval's stock tasks; without them every cell skips, so nothing on that
path has ever run. A rehearsal runs it, unmodified, against stand-ins under the real names:

* :mod:`depthprune.rehearsal.stand_ins` -- the three models under their registry ids, with the
  real architecture features at a small width (random weights, marked as stand-ins);
* :mod:`depthprune.rehearsal.datasets` -- every dataset in its real format and schema, where the
  paper path's own loaders find it offline;
* :mod:`depthprune.rehearsal.checks` -- what a rehearsal cell must satisfy instead of a
  reference: it runs, counts and shapes are what the searcher and the protocol predict, the
  saved checkpoint reloads with identical logits.

    depthprune rehearsal build --out DIR      # stand-ins + manifest (DIR/rehearsal.json)
    eval "$(depthprune rehearsal env --out DIR)"
    pytest bench/test_rehearsal.py --rehearsal DIR --results results-rehearsal

Results are flagged ``identity.stand_in`` (the marker file in the checkpoint), live in their own
results directory, and are never resumed, reported or compared as real ones (DESIGN.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MANIFEST = "rehearsal.json"


def environment(out: str | Path) -> dict[str, str]:
    """The environment a process needs to find the stand-ins built in ``out`` (read from its manifest).

    ``HF_HOME`` / ``HF_DATASETS_CACHE`` are read by huggingface_hub and datasets when they are
    imported, so they must be set before the process starts (tox, or ``eval $(... env)``).
    """
    manifest = read_manifest(out)
    return dict(manifest["environment"])


def read_manifest(out: str | Path) -> dict[str, Any]:
    from depthprune.common.jsonio import read_json  # here, not above: the package's API pages list what it imports

    path = Path(out) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no rehearsal built there (depthprune rehearsal build --out {out})")
    return read_json(path)
