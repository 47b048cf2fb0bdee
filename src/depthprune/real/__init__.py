"""The ``real`` profile's data: real English text (Python's own documentation), frozen.

``depthprune build real`` makes the shipped snapshot (``assets/real``): the text
splits, the two lm-eval tasks and the Commonsense-170k-format calibration records; ``check``
measures the model card of ``smollm2-135m`` (``depthprune measure card --model gemma3-270m``:
the card of ``gemma3-270m``). See :mod:`depthprune.real.build`.
"""
