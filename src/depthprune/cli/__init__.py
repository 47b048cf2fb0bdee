"""``depthprune`` command line: prune, cell, evaluate, heal, report, archive, verify, plan, submit, speed; build,
measure and rehearsal for the tools that make the shipped assets and measure machines and models.

Exit status: 0 on success; 2 for a usage error (bad input: one line naming the flag and
what is allowed, or the result file or archive that is broken and how, before anything is
loaded or written); 1 for a failure during the run
(one line with its reason; ``DEPTHPRUNE_DEBUG=1`` shows the traceback).

The commands live by group: :mod:`depthprune.cli.model` (prune, cell, evaluate), :mod:`depthprune.cli.heal` (heal, and prune's heal flags),
:mod:`depthprune.cli.results` (report, archive, verify, durations, time-split),
:mod:`depthprune.cli.grid` (plan, submit), :mod:`depthprune.cli.speed` (speed) and
:mod:`depthprune.cli.tools` (build, measure, rehearsal); :mod:`depthprune.cli.common` holds what they share.
"""

from __future__ import annotations

import argparse
import os
import sys

from depthprune.cli.common import check_destination, objective_params_from_flags, result_summary
from depthprune.cli.errors import EXIT_FAILURE, EXIT_USAGE
from depthprune.common.errors import InputError
from depthprune.common.jsonio import JSONFileError

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "build_parser", "check_destination", "main",
           "objective_params_from_flags", "result_summary"]


def build_parser(prog: str = "depthprune") -> argparse.ArgumentParser:
    """Every command's parser; each leaf's defaults carry ``func`` (what runs) and ``label`` (its name in errors)."""
    from depthprune.cli import grid, heal, model, results, speed, tools

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=tools.ToolParser)
    for group in (model, heal, results, grid, speed, tools):
        group.register(sub)
    return parser


def main(argv: list[str] | None = None, prog: str = "depthprune") -> int:
    """Run one command: its status, or 2 for bad input, 1 for a failure (one line on stderr each)."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)  # argparse exits 2 on its own usage errors
    label = getattr(args, "label", None) or args.command
    try:
        status: int = args.func(args)
        return status
    except (InputError, JSONFileError) as err:  # a broken result (ResultFileError) or other JSON file is bad input
        # too: exit 2, naming it
        print(f"depthprune {label}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"depthprune {label}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a failure during the run: one line, status 1
        if os.environ.get("DEPTHPRUNE_DEBUG"):
            raise
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"depthprune {label}: failed: {type(err).__name__}: {message}", file=sys.stderr)
        return EXIT_FAILURE
