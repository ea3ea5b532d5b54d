#!/usr/bin/env bash
# Installs what the integration tests start: Debian's prometheus (+ promtool), the real
# prometheus-node-exporter, victoria-metrics (single-node; the any-PromQL-store test) and openssl (test certificates), then builds (once, into ~/.cache/drs-prom, from the Go module
# proxy) upstream promtool and etcd + kube-apiserver + kube-scheduler + kubectl.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
need=()
for pair in prometheus:prometheus promtool:prometheus prometheus-node-exporter:prometheus-node-exporter openssl:openssl \
            victoria-metrics:victoria-metrics; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi
# Debian starts the packaged services; the tests run their own on free loopback ports.
for svc in prometheus prometheus-node-exporter victoria-metrics; do
  systemctl stop "$svc" >/dev/null 2>&1 || true
done
# Debian's promtool is built without kubernetes_sd_configs; the config check needs upstream's.
bash "$here/tests/prom/promtool/build.sh"
bash "$here/drs_prom/testbed/k8s_recipe/build.sh"
# helm (helm.sh/helm/v4) for the chart tests, built like the binaries above.
bash "$here/deploy/helm/tools/build.sh" >/dev/null
# The image test (tests/image, opt-in with DRS_TEST_IMAGE=1) builds and starts the image with Debian's tools.
if [ "${DRS_TEST_IMAGE:-}" = 1 ]; then
  img_need=()
  for t in podman buildah debootstrap runc; do command -v "$t" >/dev/null 2>&1 || img_need+=("$t"); done
  if [ ${#img_need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${img_need[@]}" >/dev/null
  fi
  bash "$here/deploy/image/build.sh" >/dev/null
fi
