"""Studies beyond the grid, each one module with its own command: the calibration-size curve
(:mod:`.calibration_curve`, ``depthprune measure calibration-curve``)."""
