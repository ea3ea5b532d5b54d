#!/usr/bin/env bash
# Build the drs-prom images (one per role: exporter, scheduler, retrain) from deploy/image/Containerfile with
# Debian's buildah, from nothing a registry serves: the Containerfile's BASE is a minimal Debian bookworm root
# (debootstrap from the Debian mirror apt uses) with python3, imported once as localhost/drs-prom-base:bookworm-2 and
# cached as a tarball in ${DRS_IMAGE_CACHE:-~/.cache/drs-prom/image}. Python packages come from PyPI.
# Hosts that can pull images need none of this: `podman build -f deploy/image/Containerfile --target ROLE .`
#
#   deploy/image/build.sh [ROLE...]     (default: exporter scheduler retrain)
#
# Idempotent and locked: a role is rebuilt only when its inputs change. Prints one line per role, the image name
# (localhost/drs-prom-ROLE:VERSION), the last one last. Needs root (debootstrap, rootful buildah).
# Leaves no <none> images of its own: the untagged stage images its builds made and the images a rebuild replaced
# are removed at the end; other images are not touched.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$(cd "$here/../.." && pwd)"
log() { echo "[image-build] $*" >&2; }
die() { echo "[image-build] ERROR: $*" >&2; exit 1; }
cache="${DRS_IMAGE_CACHE:-$HOME/.cache/drs-prom/image}"
mirror="${DRS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
roles=("$@"); [ ${#roles[@]} -gt 0 ] || roles=(exporter scheduler retrain)
for r in "${roles[@]}"; do
  case "$r" in exporter|scheduler|retrain) ;; *) die "unknown role $r (exporter, scheduler or retrain)";; esac
done
mkdir -p "$cache"
exec 9>"$cache/.build.lock"; flock -w 3600 9 || die "timed out waiting for the build lock"
for tool in debootstrap buildah podman; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install debootstrap buildah podman)"
done
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)"
base=localhost/drs-prom-base:bookworm-2   # -N: the recipe below; a new N rebuilds it
base_tar="$cache/base-bookworm-2.tar"
if ! podman image exists "$base"; then
  if [ ! -s "$base_tar" ]; then
    log "debootstrap bookworm (minbase + python3) from $mirror"
    root="$cache/root.tmp"; rm -rf "$root"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$mirror" >&2 \
      || die "debootstrap failed"
    # no apt lists, caches, docs, man/info pages or message translations (33 MB: a fifth of the base) in the image
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
      "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/usr/share/bash-completion
    tar -C "$root" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar" && rm -rf "$root"
  fi
  podman import --change 'CMD ["/bin/bash"]' "$base_tar" "$base" >/dev/null
fi
stamp="$( (cd "$repo" && cat pyproject.toml README.md .dockerignore deploy/image/Containerfile deploy/image/build.sh \
  && git ls-files -s drs_prom exporters models) | sha256sum | cut -d' ' -f1)"
ca_args=()
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
if [ -s "$host_ca" ]; then  # the host's trust (e.g. an egress proxy's CA) for pip inside the build
  ca_args=(-v "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
fi
# The IDs of the images this run's builds committed (buildah prints each as "--> ID") and of the images they
# replaced: once untagged, these are the <none> images this run leaves, removed below.
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT; ours="$tmp/ours"; : >"$ours"
for role in "${roles[@]}"; do
  image="localhost/drs-prom-$role:$version"
  if podman image exists "$image" \
     && [ "$(podman image inspect "$image" --format '{{index .Labels "drs-prom.stamp"}}')" = "$stamp" ]; then
    echo "$image"; continue
  fi
  podman image inspect "$image" --format '{{.Id}}' >>"$ours" 2>/dev/null || true
  start=$(date +%s)
  log "buildah build $image (target $role, BASE $base)"
  # chroot isolation: no OCI runtime or cgroups needed at build time (this runs in containers/VMs too).
  buildah build --isolation chroot --network host --ulimit nofile=1024:1024 --layers \
    --build-arg "BASE=$base" "${ca_args[@]}" --label "drs-prom.stamp=$stamp" --label "drs-prom.role=$role" \
    --target "$role" -f "$here/Containerfile" -t "$image" "$repo" 2>&1 | tee "$tmp/build.log" >&2 \
    || die "buildah build of $role failed"
  sed -n 's/^--> \([0-9a-f]\{11,\}\)$/\1/p' "$tmp/build.log" >>"$ours"
  log "built $image in $(( $(date +%s) - start ))s, $(podman image inspect "$image" --format '{{.Size}}') bytes"
  echo "$image"
done
# --layers keeps each stage's last image as a cache; a stage that no tagged image is built on (the role venvs) stays
# as <none>, and so does the image a rebuild untagged. Removed at the end, so the roles built here share the cache.
if [ -s "$ours" ]; then
  for id in $(podman images --quiet --no-trunc --filter dangling=true); do
    id="${id#sha256:}"
    if grep -q "^${id:0:11}" "$ours"; then podman rmi "$id" >/dev/null 2>&1 || true; fi
  done
fi
