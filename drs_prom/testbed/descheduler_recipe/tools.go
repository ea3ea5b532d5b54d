//go:build tools

// Package tools pins kubernetes-sigs/descheduler, the rebalancer the testbed compares drs-prom's against.
// It is never compiled; it only keeps the command in go.mod / go.sum.
package tools

import _ "sigs.k8s.io/descheduler/cmd/descheduler"
