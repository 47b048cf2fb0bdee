"""Small tools every room uses, and that import nothing of the package.

* :mod:`~depthprune.common.jsonio` -- JSON and JSON-lines files, read, written and diagnosed in one place;
* :mod:`~depthprune.common.text_tables` -- how the suite writes a table and a number;
* :mod:`~depthprune.common.plugins` -- registries by name that fill themselves (searchers, objectives, claims);
* :mod:`~depthprune.common.params` -- range checks of searcher and objective parameters;
* :mod:`~depthprune.common.errors` -- the one error for bad input, which the CLI maps to exit status 2;
* :mod:`~depthprune.common.layout` -- the repository's folders and file names;
* :mod:`~depthprune.common.machine` -- the machine's facts (memory, workers) and on/off switches.
"""
