"""Simulated worlds standing in for the robot: the continuously stepped MuJoCo world, the closed-loop experiment."""
