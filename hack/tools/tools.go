//go:build tools

// Package tools pins the control-plane binaries that the sandbox and the
// end-to-end tests run. Nothing here is compiled into carbonshift; the
// imports only keep the dependencies in go.mod across `go mod tidy`.
package tools

import (
	_ "github.com/karmada-io/karmada/cmd/controller-manager"
	_ "github.com/karmada-io/karmada/cmd/webhook"
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
