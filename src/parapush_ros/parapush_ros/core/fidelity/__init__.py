"""Fidelity to the real world: recorded pushes, their replay through the models, calibration from them."""
