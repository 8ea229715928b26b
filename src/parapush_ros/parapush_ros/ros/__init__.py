"""rclpy helpers shared by the nodes: parameters, topics and QoS, conversions, markers, spinning."""
