"""What pruning buys in inference speed: the dense and the rebuilt pruned model, timed in one process.

:mod:`depthprune.speed.timing` holds the timed workloads (prefill, decode with the KV cache), peak
memory and the statistics; :mod:`depthprune.speed.costs` the per-block cost table and the speedup
it predicts for a removed set; :mod:`depthprune.speed.compare` alternates the dense and the pruned
model over rounds and puts the measured speedup beside the two predictions. ``depthprune speed``
(:mod:`depthprune.cli.speed`) is the command; docs/speed.md says what it measures and why.
"""

from __future__ import annotations
