#!/usr/bin/env bash
# Build the drs-prom image with Debian's buildah, from nothing a registry serves:
#  1. a minimal Debian bookworm root (debootstrap from the Debian mirror apt uses) with python3,
#     imported once as localhost/drs-prom-base:bookworm and cached as a tarball in
#     ${DRS_IMAGE_CACHE:-~/.cache/drs-prom/image};
#  2. the project wheel (pip wheel .) and the shipped models on top (deploy/image/Containerfile).
# Idempotent and locked: the image is rebuilt only when the wheel's inputs or the models change.
# The LAST stdout line is the image name. Needs root (debootstrap, rootful buildah).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$(cd "$here/../.." && pwd)"
log() { echo "[image-build] $*" >&2; }
die() { echo "[image-build] ERROR: $*" >&2; exit 1; }
cache="${DRS_IMAGE_CACHE:-$HOME/.cache/drs-prom/image}"
mirror="${DRS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$cache"
exec 9>"$cache/.build.lock"; flock -w 3600 9 || die "timed out waiting for the build lock"
for tool in debootstrap buildah podman; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install debootstrap buildah podman)"
done
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)"
image="localhost/drs-prom:$version"
stamp="$( (cd "$repo" && cat pyproject.toml deploy/image/Containerfile && git ls-files -s drs_prom exporters models) | sha256sum | cut -d' ' -f1)"
if podman image exists "$image" && [ "$(podman image inspect "$image" --format '{{index .Labels "drs-prom.stamp"}}')" = "$stamp" ]; then
  echo "$image"; exit 0
fi
start=$(date +%s)
base_tar="$cache/base-bookworm.tar"
if ! podman image exists localhost/drs-prom-base:bookworm; then
  if [ ! -s "$base_tar" ]; then
    log "debootstrap bookworm (minbase + python3) from $mirror"
    root="$cache/root.tmp"; rm -rf "$root"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$mirror" >&2 \
      || die "debootstrap failed"
    # no apt lists, docs or caches in the image
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
    tar -C "$root" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar" && rm -rf "$root"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$base_tar" localhost/drs-prom-base:bookworm >/dev/null
fi
ctx="$cache/context"; rm -rf "$ctx"; mkdir -p "$ctx/dist"
log "building the wheel"
python3 -m pip wheel --no-deps -q -w "$ctx/dist" "$repo" >&2 || die "pip wheel failed"
cp -r "$repo/models" "$ctx/models"
mkdir -p "$HOME/.cache/pip"
ca_args=()
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
if [ -s "$host_ca" ]; then  # the host's trust (e.g. an egress proxy's CA) for pip inside the build
  ca_args=(-v "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
log "buildah build $image"
# chroot isolation: no OCI runtime or cgroups needed at build time (this runs in containers/VMs too).
buildah build --isolation chroot --network host --ulimit nofile=1024:1024 \
  -v "$HOME/.cache/pip:/root/.cache/pip" "${ca_args[@]}" --label "drs-prom.stamp=$stamp" \
  -f "$here/Containerfile" -t "$image" "$ctx" >&2 || die "buildah build failed"
rm -rf "$ctx"
log "built $image in $(( $(date +%s) - start ))s, $(podman image inspect "$image" --format '{{.Size}}') bytes"
echo "$image"
