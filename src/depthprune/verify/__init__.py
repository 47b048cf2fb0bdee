"""The numerics of checking a result somewhere else than where it was made (``depthprune verify``, and the grid's
check across precisions, which calls it). It imports neither :mod:`depthprune.grid` nor :mod:`depthprune.report`.

* :mod:`~depthprune.verify.replay` -- each cell's searcher, run again on its recorded trace, with no model;
* :mod:`~depthprune.verify.bands` -- rounding bands for calibration losses, per pair of numeric classes;
* :mod:`~depthprune.verify.evaluation` -- the evaluation's bands (accuracies and window NLLs);
* :mod:`~depthprune.verify.losses` -- one comparison of every set two runs share;
* :mod:`~depthprune.verify.forks` -- a cell against a reference of another precision: a numeric fork or a change;
* :mod:`~depthprune.verify.remeasure` -- a cell's sets measured again here, against the bands;
* :mod:`~depthprune.verify.second` -- the second opinion in the recorded precision;
* :mod:`~depthprune.verify.findings` -- failures a fixed rule reported, recorded;
* :mod:`~depthprune.verify.firmness` -- how firmly each cell's set is decided, given the bands;
* :mod:`~depthprune.verify.rivals` -- the answer had rounding turned a decision inside a band;
* :mod:`~depthprune.verify.run` -- ``depthprune verify`` over a results directory or archives.
"""
