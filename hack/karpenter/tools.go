//go:build tools

// Package tools pins Karpenter's kwok cloud provider (the real Karpenter controller with
// simulated instances) for the sandbox's workload cluster. Nothing here is compiled into
// carbonshift; the import only keeps the dependency in go.mod across `go mod tidy`.
// Its own module: Karpenter's go directive and dependency versions would otherwise leak
// into the kube-apiserver and Karmada builds of hack/tools.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
