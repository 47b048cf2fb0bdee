"""The data room: where the text comes from and what is measured on it.

* :mod:`~depthprune.data.sources` -- named text sources and the protocols that cut them into windows and items;
* :mod:`~depthprune.data.profiles` -- what "the paper's", "the tiny family's" and "the real models'" settings mean;
* :mod:`~depthprune.data.protocol` -- the evaluation protocol: tasks, headline metrics, :class:`~depthprune.data.protocol.EvalConfig`.
"""
