"""The scoring room: a removal set in, a calibration loss out, with as few layer-forwards as possible.

* :mod:`~depthprune.scoring.scorer` -- the engine (:class:`~depthprune.scoring.scorer.Scorer`);
* :mod:`~depthprune.scoring.calibration` -- what every forward over the calibration set needs;
* :mod:`~depthprune.scoring.state_cache` -- the prefix cache of hidden states at block boundaries;
* :mod:`~depthprune.scoring.dense_states` -- the dense model's states, below the first removed block;
* :mod:`~depthprune.scoring.gates` -- per-block gates and the energy ``cbo`` minimises;
* :mod:`~depthprune.scoring.request_cost` -- what a request sequence costs as if it ran alone;
* :mod:`~depthprune.scoring.score_store` -- a condition's losses on disk, shared by every cell and worker.

Imported by their own paths: the engine pulls in torch and the objectives, which a reader of the score
store does not need.
"""
