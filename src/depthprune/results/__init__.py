"""The results room: what a run writes and what it records of where it ran.

* :mod:`~depthprune.results.schema` -- the result schema: one JSON object per search, read and validated;
* :mod:`~depthprune.results.provenance` -- the environment, versions and code fingerprint a result records;
* :mod:`~depthprune.results.store` -- a results directory: one file per cell, written atomically, resumable;
* :mod:`~depthprune.results.archive` -- one compressed file per grid, which a clean clone re-judges.
"""
