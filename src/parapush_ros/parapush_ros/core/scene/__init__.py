"""The world description: planar state layout, scene files, geometry, feasibility projection."""
