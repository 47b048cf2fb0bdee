"""Verification of archived cell results on any machine (``depthprune verify``).

:mod:`depthprune.verify.replay` checks the code path with no model: each cell's searcher, run again
on the cell's own recorded trace, must ask for the recorded sets in order and return the recorded
answer. :mod:`depthprune.verify.run` runs it over a results directory or a folder of archives and
writes the per-cell table and JSON.
"""
