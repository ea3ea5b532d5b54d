#!/usr/bin/env bash
# Build upstream promtool (Go module github.com/prometheus/prometheus, version from go.mod)
# with Kubernetes service discovery, for `promtool check config` on
# deploy/prometheus/prometheus.yml: Debian's promtool is built without kubernetes_sd_configs.
# plugins.go.overlay replaces the upstream SD plugin list (in a local copy) so only the
# kubernetes, file and http SDs are compiled and no cloud SDK is downloaded.
#
# Binary and Go caches live OUTSIDE the repo:
#   ${DRS_PROMTOOL_CACHE:-$HOME/.cache/drs-prom/promtool-<version>}/bin/promtool
# The Go caches and the module copy are removed once promtool is built (about 1.5 GB; promtool is 57 MB), unless the
# caches are given with DRS_PROMTOOL_GOMODCACHE / DRS_PROMTOOL_GOCACHE.
# Idempotent (a no-op once built) and locked. The LAST stdout line is the binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(awk '$1=="require" && $2=="github.com/prometheus/prometheus" {print $3}' "$here/go.mod")"
[ -n "$version" ] || { echo "[promtool-build] ERROR: no prometheus version in $here/go.mod" >&2; exit 1; }
cache="${DRS_PROMTOOL_CACHE:-$HOME/.cache/drs-prom/promtool-$version}"
bin="$cache/bin/promtool"
stamp="$(cat "$here/go.mod" "$here/plugins.go.overlay" | sha256sum | cut -d' ' -f1)"
built() { [ -x "$bin" ] && [ "$(cat "$cache/bin/.stamp" 2>/dev/null)" = "$stamp" ]; }
if built; then echo "$bin"; exit 0; fi
mkdir -p "$cache/bin"
exec 9>"$cache/.build.lock"   # concurrent callers wait for one build (it removes the Go caches at its end)
flock -w 3600 9 || { echo "[promtool-build] ERROR: timed out waiting for the build lock" >&2; exit 1; }
if built; then echo "$bin"; exit 0; fi
command -v go >/dev/null 2>&1 || { echo "[promtool-build] ERROR: go not found (needed to build promtool with kubernetes SD)" >&2; exit 1; }
export GOMODCACHE="${DRS_PROMTOOL_GOMODCACHE:-$cache/gomod}" GOCACHE="${DRS_PROMTOOL_GOCACHE:-$cache/gocache}"
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
mkdir -p "$cache/bin" "$cache/src"
# Work on a copy so the repo gets no go.sum churn.
cp "$here/go.mod" "$here/tools.go" "$cache/src/"
moddir="$(cd "$cache/src" && go mod download -json "github.com/prometheus/prometheus@$version" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
[ -n "$moddir" ] || { echo "[promtool-build] ERROR: cannot download github.com/prometheus/prometheus@$version" >&2; exit 1; }
# go build -overlay may not touch GOMODCACHE, so build a writable copy of the module
# through a local replace directive and give it our plugin list.
rm -rf "$cache/prometheus"
cp -r "$moddir" "$cache/prometheus" && chmod -R u+w "$cache/prometheus"
cp "$here/plugins.go.overlay" "$cache/prometheus/plugins/plugins.go"
(cd "$cache/src" && go mod edit -replace "github.com/prometheus/prometheus=$cache/prometheus")
echo "[promtool-build] building promtool $version (kubernetes SD only; a few minutes on 2 cores)" >&2
(cd "$cache/src" && nice -n 10 go build -ldflags "-s -w -X github.com/prometheus/common/version.Version=2.${version#v0.}" \
   -o "$bin.tmp" github.com/prometheus/prometheus/cmd/promtool)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$cache/bin/.stamp"
# Nothing reads these once the binary exists (a later run exits above; a rebuild downloads and copies again).
rm -rf "$cache/prometheus"
[ -n "${DRS_PROMTOOL_GOMODCACHE:-}" ] || (cd "$cache/src" && go clean -modcache)
[ -n "${DRS_PROMTOOL_GOCACHE:-}" ] || rm -rf "$GOCACHE"
echo "$bin"
