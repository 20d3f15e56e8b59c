"""What every edge of the process shares: structured logs, Prometheus metrics and the
leader-gated periodic loop."""
