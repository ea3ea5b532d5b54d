#!/usr/bin/env bash
# Build kubernetes-sigs/descheduler (version pinned in this folder's go.mod/go.sum) from the Go module proxy: the
# rebalancer the testbed and the rebalancer's harness compare `drs-prom rebalance` against. It ships inside the
# drs-prom package beside the control plane's recipe.
#
# * Binary and Go caches live OUTSIDE the repo:
#     ${DRS_DESCHEDULER_CACHE:-$HOME/.cache/drs-prom/descheduler-<version>}/bin/descheduler
#   The Go caches are removed once the binary is built (about 1 GB; the binary is 80 MB), unless given with
#   DRS_DESCHEDULER_GOMODCACHE / DRS_DESCHEDULER_GOCACHE.
# * One link-time setting, nothing patched: the descheduler reads the CA of its Prometheus from the pod's
#   service-account mount (client.K8sPodCAFilePath, /var/run/secrets/...), which a process on a host lacks; the
#   build points that variable at serviceaccount/ca.crt beside the binary, a file the launcher writes
#   (drs_prom.testbed.descheduler), so the real binary runs unchanged outside a pod and nothing on the host is touched.
# * Idempotent: exits at once when the binary for this go.mod/go.sum exists. Locked: concurrent callers wait.
# * The LAST line printed on stdout is the binary's path (progress goes to stderr).
# First build: about 3 minutes on 2 cores; later runs take well under a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "[descheduler-build] $*" >&2; }
die() { echo "[descheduler-build] ERROR: $*" >&2; exit 1; }
version="$(awk '$1=="require" && $2=="sigs.k8s.io/descheduler" {print $3}' "$here/go.mod")"
[ -n "$version" ] || die "no sigs.k8s.io/descheduler version in $here/go.mod"
cache="${DRS_DESCHEDULER_CACHE:-$HOME/.cache/drs-prom/descheduler-$version}"
bin="$cache/bin/descheduler"
ca_path="$cache/bin/serviceaccount/ca.crt"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/tools.go" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
built() { [ -x "$bin" ] && [ "$(cat "$cache/bin/.stamp" 2>/dev/null)" = "$stamp" ]; }
if built; then echo "$bin"; exit 0; fi
mkdir -p "$cache/bin/serviceaccount"
exec 9>"$cache/.build.lock"
log "waiting for build lock $cache/.build.lock"
flock -w 3600 9 || die "timed out waiting for the build lock"
if built; then echo "$bin"; exit 0; fi
command -v go >/dev/null 2>&1 || die "go not found in PATH (need go >= $(awk '$1=="go"{print $2}' "$here/go.mod"))"
export GOMODCACHE="${DRS_DESCHEDULER_GOMODCACHE:-$cache/gomod}" GOCACHE="${DRS_DESCHEDULER_GOCACHE:-$cache/gocache}"
export GOFLAGS="-modcacherw -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
start=$(date +%s)
log "building descheduler $version into $cache/bin (first run: a few minutes)"
ldflags="-s -w -X sigs.k8s.io/descheduler/pkg/version.version=$version"
ldflags+=" -X sigs.k8s.io/descheduler/pkg/descheduler/client.K8sPodCAFilePath=$ca_path"
(cd "$here" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" sigs.k8s.io/descheduler/cmd/descheduler) \
  || die "go build of descheduler $version failed"
mv "$bin.tmp" "$bin"
echo "$stamp" > "$cache/bin/.stamp"
# Nothing reads the Go caches once the binary exists (a later run exits above; a rebuild downloads again).
[ -n "${DRS_DESCHEDULER_GOMODCACHE:-}" ] || (cd "$here" && go clean -modcache)
[ -n "${DRS_DESCHEDULER_GOCACHE:-}" ] || rm -rf "$GOCACHE"
log "done in $(( $(date +%s) - start ))s"
echo "$bin"
