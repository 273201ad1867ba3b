"""Benchmarks: run by ``./run bench``, never by the test suite."""
