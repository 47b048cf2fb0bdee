"""Build the ``real`` profile's frozen data from Python's own documentation.

``depthprune build real STAGE``: the frozen splits and tasks (:mod:`depthprune.builders.python_docs`), then, for
``check`` and ``all``, the real models' cards measured with their defaults (:mod:`depthprune.cards.measure`). The
CLI composes the two rooms: the cards read what the builder writes, so the builder does not call them.
"""

from __future__ import annotations

import argparse

from depthprune.builders import python_docs


def add_arguments(p: argparse.ArgumentParser) -> None:
    python_docs.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    status = python_docs.run(args)
    if args.stage in ("check", "all"):
        from depthprune.cards import measure as check

        defaults = argparse.ArgumentParser()
        check.add_arguments(defaults)
        check.run(defaults.parse_args([]))
    return status
