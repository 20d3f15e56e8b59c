//go:build tools

// Package tools pins Helm, which renders, lints and installs charts/carbonshift in the
// tests. hack/build-helm.sh builds helm.sh/helm/v3/cmd/helm from this module into the
// binary cache; nothing here is compiled into carbonshift.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
