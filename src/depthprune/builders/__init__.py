"""The builders of the shipped data: each writes frozen files under ``assets/`` that the suite reads.

``depthprune build real`` (:mod:`depthprune.builders.python_docs`): the ``real`` profile's text
splits and its two lm-eval tasks from Python's own documentation; ``depthprune build pool``
(:mod:`depthprune.builders.calibration_pool`): the enlarged calibration pool; ``depthprune build
wordnet-tasks`` (:mod:`depthprune.builders.wordnet.tasks`): the WordNet multiple-choice tasks;
``depthprune build task-baselines`` (:mod:`depthprune.builders.task_baselines`): every shipped task's
model-free baselines (:mod:`depthprune.builders.model_free`'s readers). The tiny family builds itself
(``depthprune build tiny``, :mod:`depthprune.tiny.build`).
"""
