//go:build tools

// Package tools pins the Karmada v1.16.0 control-plane binaries that the end-to-end
// tests run beside the pinned release of hack/tools (a Karmada API without
// overflowAffinities). A module of its own: v1.16.0 requires k8s.io/* v0.34 and
// controller-runtime v0.22, hack/tools v0.35 and v0.23, so the two cannot share a module
// graph. Nothing here is compiled into carbonshift; the imports only keep the
// dependencies in go.mod across `go mod tidy`.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/scheduler"
	_ "github.com/karmada-io/karmada/cmd/webhook"
)
