#!/usr/bin/env bash
# Build helm (helm.sh/helm/v4, version pinned in this folder's go.mod/go.sum) from the Go module proxy,
# for the chart tests (helm lint / template / install into the test control plane) and for packaging.
#
# * Binary and Go caches live OUTSIDE the repo:
#     ${DRS_HELM_CACHE:-$HOME/.cache/drs-prom/helm-<version>}/bin/helm
#   The Go caches are removed once the binary is built (about 1.7 GB; helm is 64 MB), unless given with
#   DRS_HELM_GOMODCACHE / DRS_HELM_GOCACHE.
# * Idempotent: exits at once when the binary for this go.mod/go.sum exists.
# * Locked: concurrent callers (several pytest sessions, make test) wait for one build.
# * The LAST line printed on stdout is the binary's path (progress goes to stderr).
# First build: a few minutes on 2 cores; later runs take well under a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "[helm-build] $*" >&2; }
die() { echo "[helm-build] ERROR: $*" >&2; exit 1; }
version="$(awk '$1=="require" && $2=="helm.sh/helm/v4" {print $3}' "$here/go.mod")"
[ -n "$version" ] || die "no helm.sh/helm/v4 version in $here/go.mod"
cache="${DRS_HELM_CACHE:-$HOME/.cache/drs-prom/helm-$version}"
bin="$cache/bin/helm"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/tools.go" | sha256sum | cut -d' ' -f1)"
built() { [ -x "$bin" ] && [ "$(cat "$cache/bin/.stamp" 2>/dev/null)" = "$stamp" ]; }
if built; then echo "$bin"; exit 0; fi
mkdir -p "$cache/bin"
exec 9>"$cache/.build.lock"
log "waiting for build lock $cache/.build.lock"
flock -w 3600 9 || die "timed out waiting for the build lock"
if built; then echo "$bin"; exit 0; fi
command -v go >/dev/null 2>&1 || die "go not found in PATH (need go >= $(awk '$1=="go"{print $2}' "$here/go.mod"))"
export GOMODCACHE="${DRS_HELM_GOMODCACHE:-$cache/gomod}" GOCACHE="${DRS_HELM_GOCACHE:-$cache/gocache}"
export GOFLAGS="-modcacherw -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
start=$(date +%s)
log "building helm $version into $cache/bin (first run: a few minutes)"
(cd "$here" && nice -n 10 go build -trimpath \
   -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
   -o "$bin.tmp" helm.sh/helm/v4/cmd/helm) || die "go build of helm $version failed"
mv "$bin.tmp" "$bin"
echo "$stamp" > "$cache/bin/.stamp"
# Nothing reads the Go caches once the binary exists (a later run exits above; a rebuild downloads again).
[ -n "${DRS_HELM_GOMODCACHE:-}" ] || (cd "$here" && go clean -modcache)
[ -n "${DRS_HELM_GOCACHE:-}" ] || rm -rf "$GOCACHE"
log "done in $(( $(date +%s) - start ))s"
echo "$bin"
