"""Exit statuses and the usage error of every ``depthprune`` command.

A leaf module (it imports nothing of the package), so the tool modules that ``depthprune build``,
``depthprune measure`` and ``depthprune rehearsal`` run can raise :class:`depthprune.cli.errors.UsageError` without an
import cycle: the CLI imports them, they import only this.
"""

from __future__ import annotations

#: A failure during the run: one line with its reason (``DEPTHPRUNE_DEBUG=1`` shows the traceback).
EXIT_FAILURE = 1
#: Bad input, found before anything is loaded or written.
EXIT_USAGE = 2


class UsageError(ValueError):
    """Bad command-line input (exit status 2): ``depthprune`` prints it as one line naming the command."""
