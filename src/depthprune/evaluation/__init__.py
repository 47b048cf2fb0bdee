"""The evaluation room: a (pruned) model in, its perplexities and zero-shot accuracies out.

* :mod:`~depthprune.evaluation.evaluate` -- the perplexity suite and the lm-eval tasks, cached on disk;
* :mod:`~depthprune.evaluation.lm_adapter` -- lm-eval's model, each shared prefix computed once;
* :mod:`~depthprune.evaluation.templates` -- lm-eval's prompt templates, compiled once per evaluation;
* :mod:`~depthprune.evaluation.task_files` -- the ``utils.py`` beside a profile's local task YAMLs.

What is evaluated (tasks, metrics, windows) is the protocol's (:mod:`depthprune.data.protocol`).
"""
