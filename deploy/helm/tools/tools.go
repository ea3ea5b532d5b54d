//go:build tools

// Package tools pins the helm command built by build.sh (tests and chart packaging).
// It is never compiled; it only keeps the command in go.mod / go.sum.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
