//go:build tools

// Package tools pins the Liqo virtual kubelet the Liqo end-to-end tests run
// (tests/e2e/test_liqo.py); hack/build-liqo.sh builds it.
package tools

import _ "github.com/liqotech/liqo/cmd/virtual-kubelet"
