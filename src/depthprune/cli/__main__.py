"""``python -m depthprune.cli``: the ``depthprune`` command where the package is not installed
(a checkout on ``PYTHONPATH``, as on the device machine)."""

import sys

from depthprune.cli import main

sys.exit(main(prog="depthprune"))
