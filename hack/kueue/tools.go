//go:build tools

// Package tools pins Kueue's controller manager for hack/build-kueue.sh.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
