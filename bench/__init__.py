"""Benchmarks (``make bench``): admission and score throughput/latency on one core."""
