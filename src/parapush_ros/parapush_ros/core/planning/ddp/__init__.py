"""Differential dynamic programming for the quasi-static pusher-slider (paper 003: ZS/DS/DP/WS-DDP)."""
