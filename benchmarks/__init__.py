"""Benchmark harness: throughput, FLOP/s against the matmul roofline, startup, time to accuracy,
scaling, all-reduce volume and jaxgen render wall. Run it with `python -m benchmarks`."""
