#!/usr/bin/env bash
# Build the real Kubernetes control-plane binaries that the testbed and the integration
# tests run (drs_prom/testbed/controlplane.py): kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl
# and etcd, at the versions pinned in the go.mod beside this script. It ships inside the
# drs-prom package, so `drs-prom testbed --build` works from an installed package too.
#
# * Binaries go to a cache folder OUTSIDE the repo, keyed by version:
#     ${DRS_K8S_CACHE:-$HOME/.cache/drs-prom/k8s-<version>}/bin
#   GOMODCACHE and GOCACHE live inside that folder while it builds and are removed
#   once the binaries are there (about 3.5 GB; the binaries are 340 MB). Set
#   DRS_K8S_GOMODCACHE / DRS_K8S_GOCACHE to use caches of your own, which are kept.
# * Idempotent: exits at once when the binaries for this go.mod/go.sum exist.
# * etcd: built from go.etcd.io/etcd/server/v3 at the version kubernetes pins
#   (default, DRS_K8S_ETCD=build). With DRS_K8S_ETCD=system the Debian
#   `etcd-server` package is used instead (installed with apt-get if missing)
#   and symlinked into the bin dir.
# * The LAST line printed on stdout is the bin dir (progress goes to stderr).
#
# Needs: go (>= the `go` line of go.mod), a Go module proxy. First build takes
# ~10-20 minutes on 2 cores; later runs take well under a second.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"

log() { echo "[k8s-build] $*" >&2; }
die() { echo "[k8s-build] ERROR: $*" >&2; exit 1; }

K8S_VERSION="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3} $1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' go.mod | head -n1)"
[ -n "$K8S_VERSION" ] || die "cannot read k8s.io/kubernetes version from $HERE/go.mod"
ETCD_VERSION="$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' go.mod | head -n1)"
MINOR="${K8S_VERSION#v1.}"; MINOR="${MINOR%%.*}"

CACHE="${DRS_K8S_CACHE:-$HOME/.cache/drs-prom/k8s-$K8S_VERSION}"
BIN="$CACHE/bin"
ETCD_MODE="${DRS_K8S_ETCD:-build}"

# Stamp: what the current binaries were built from.
STAMP_WANT="$(cat go.mod go.sum tools.go | sha256sum | cut -d' ' -f1) etcd=$ETCD_MODE"
STAMP_FILE="$BIN/.build-stamp"

have_all() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd; do
    [ -x "$BIN/$b" ] || return 1
  done
  [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$STAMP_WANT" ]
}

if have_all; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
# Serialise concurrent builds (several pytest sessions / engineers).
exec 9>"$CACHE/.build.lock"
if command -v flock >/dev/null 2>&1; then
  log "waiting for build lock $CACHE/.build.lock"
  flock -w 3600 9 || die "timed out waiting for build lock"
  if have_all; then echo "$BIN"; exit 0; fi
fi

command -v go >/dev/null 2>&1 || die "go not found in PATH (need go >= $(awk '$1=="go"{print $2}' go.mod))"
GO_WANT="$(awk '$1=="go"{print $2}' go.mod)"
GO_HAVE="$(go env GOVERSION | sed 's/^go//')"
if [ "$(printf '%s\n%s\n' "$GO_WANT" "$GO_HAVE" | sort -V | head -n1)" != "$GO_WANT" ]; then
  die "go $GO_HAVE is older than go $GO_WANT required by k8s.io/kubernetes $K8S_VERSION"
fi

export GOMODCACHE="${DRS_K8S_GOMODCACHE:-$CACHE/gomod}"
export GOCACHE="${DRS_K8S_GOCACHE:-$CACHE/gocache}"
export GOFLAGS="-modcacherw -mod=readonly ${GOFLAGS:-}"
export GOTOOLCHAIN=local      # never download a toolchain
export CGO_ENABLED=0
export GOWORK=off

BUILD_DATE="$(date -u +'%Y-%m-%dT%H:%M:%SZ')"
LDFLAGS="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  LDFLAGS+=" -X '$pkg.gitVersion=$K8S_VERSION' -X '$pkg.gitMajor=1' -X '$pkg.gitMinor=$MINOR'"
  LDFLAGS+=" -X '$pkg.gitTreeState=clean' -X '$pkg.buildDate=$BUILD_DATE'"
done

START=$(date +%s)
log "building kube-apiserver kube-controller-manager kube-scheduler kubectl $K8S_VERSION into $BIN (go $GO_HAVE, this takes a while on first run)"
go build -trimpath -ldflags="$LDFLAGS" -o "$BIN/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl >&2 || die "go build of kubernetes $K8S_VERSION failed"

if [ "$ETCD_MODE" = "system" ]; then
  if ! command -v etcd >/dev/null 2>&1; then
    log "etcd not found; installing Debian etcd-server with apt-get"
    command -v apt-get >/dev/null 2>&1 || die "etcd missing and apt-get not available"
    (apt-get install -y -q etcd-server >&2 || { apt-get update -q >&2 && apt-get install -y -q etcd-server >&2; }) \
      || die "apt-get install etcd-server failed"
    # The Debian package enables a system service; the harness runs its own.
    (systemctl disable --now etcd >/dev/null 2>&1 || true)
  fi
  ln -sf "$(command -v etcd)" "$BIN/etcd"
else
  log "building etcd $ETCD_VERSION into $BIN"
  rm -f "$BIN/etcd"
  go build -trimpath -ldflags="-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3 >&2 \
    || die "go build of etcd $ETCD_VERSION failed"
fi

echo "$STAMP_WANT" > "$STAMP_FILE"
# Nothing reads the Go caches once the binaries exist (a later run exits above; a rebuild downloads again).
[ -n "${DRS_K8S_GOMODCACHE:-}" ] || go clean -modcache
[ -n "${DRS_K8S_GOCACHE:-}" ] || rm -rf "$GOCACHE"
END=$(date +%s)
log "done in $((END - START))s"
ls -l "$BIN" >&2
echo "$BIN"
