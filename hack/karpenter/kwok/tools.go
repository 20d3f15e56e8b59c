//go:build tools

// Package tools pins the KWOK controller, which turns the Nodes Karpenter's kwok provider
// creates into Ready nodes and the pods bound to them into Running pods. Its own module:
// KWOK v0.8.0 pins k8s.io/* v0.36 and controller-runtime v0.24, Karpenter v1.14.1 v0.35
// and v0.23, and one module would force both onto the newer ones.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
