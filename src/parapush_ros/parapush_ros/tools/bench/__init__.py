"""Benchmarks (``parapush bench ...``): each prints a table, writes JSON and saves PNG plots.

Speed and accuracy goals are checked here, never by timing asserts in tests.
"""
