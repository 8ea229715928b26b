"""Robot I/O logic without ROS: mocap tracking, NatNet parsing, command safety."""
