//go:build tools

// Package tools pins the Open Cluster Management placement controller for hack/build-ocm.sh.
package tools

import (
	_ "open-cluster-management.io/ocm/cmd/placement"
)
