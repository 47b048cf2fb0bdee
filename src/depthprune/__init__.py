"""depthprune: depth pruning of LLMs, objective x search, as a reproducible benchmark."""
__version__ = "0.2.0"
