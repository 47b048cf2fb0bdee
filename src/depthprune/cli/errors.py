"""Exit statuses of every ``depthprune`` command. Bad input is :class:`depthprune.common.errors.InputError`,
raised by whichever room finds it; the CLI maps it to :data:`EXIT_USAGE`.
"""

from __future__ import annotations

#: A failure during the run: one line with its reason (``DEPTHPRUNE_DEBUG=1`` shows the traceback).
EXIT_FAILURE = 1
#: Bad input, found before anything is loaded or written.
EXIT_USAGE = 2
