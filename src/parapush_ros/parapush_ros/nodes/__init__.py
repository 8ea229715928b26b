"""Thin rclpy nodes: each translates messages and parameters to core calls and back."""
