"""The suite's one error for bad input: a command's argument, a case file's field, a tool's option.

Raised before anything is loaded or written, by whichever room finds it (the CLI's own parsers, and the tools
it runs: ``depthprune measure``, ``depthprune build``, ``depthprune rehearsal``); the CLI maps it to exit status 2
(:mod:`depthprune.cli`). Its own module so that no room imports the CLI to raise it.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input (exit status 2 from ``depthprune``): the message names where it is and what is allowed."""
