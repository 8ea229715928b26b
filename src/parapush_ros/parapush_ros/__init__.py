"""parapush_ros: physics-based robotic pushing for ROS 2.

Sub-packages:
  core  -- ROS-free models and planners (analytical/learned coarse models, MuJoCo fine model, Parareal).
  cli   -- the `parapush` command line (``parapush demo`` ...).
ROS 2 nodes live beside them and depend on rclpy and parapush_msgs; the core never imports ROS.
"""

__version__ = "0.1.0"
