//go:build tools

// Package tools pins Prometheus and promtool for hack/build-prometheus.sh.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
