"""ROS-free core of parapush: scenes, physics models, Parareal, optimisers and MPC.

Nothing in this package imports rclpy, so it can be tested, benchmarked and reused without ROS.
"""
