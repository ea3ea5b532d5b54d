#!/usr/bin/env bash
# Installs what the integration tests start: Debian's prometheus (+ promtool), the real
# prometheus-node-exporter, victoria-metrics (single-node; the any-PromQL-store test) and openssl (test certificates), then builds (once, into ~/.cache/drs-prom, from the Go module
# proxy) upstream promtool, etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kubectl and the descheduler.
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
  # The tests start their own Prometheus, node exporter and VictoriaMetrics as private processes on free loopback
  # ports; they need only the binaries. Debian's packages would also start a system service on install, so for the
  # packages installed HERE (and only those) a policy-rc.d (Debian's invoke-rc.d policy hook) refuses that first
  # start during this apt-get call; it is removed right after. A service already running on this host (installed
  # before, by someone else) is never stopped or touched: its package is not in the list.
  deny=()
  for svc in prometheus prometheus-node-exporter victoria-metrics; do
    printf '%s\n' "${need[@]}" | grep -qx "$svc" && deny+=("$svc")
  done
  policy=/usr/sbin/policy-rc.d; ours=""
  if [ ${#deny[@]} -gt 0 ] && [ ! -e "$policy" ]; then
    # 101: action forbidden for the services named; 104: no opinion for every other service
    printf '#!/bin/sh\ncase "$1" in %s) exit 101;; esac\nexit 104\n' "$(IFS='|'; echo "${deny[*]}")" \
      | $SUDO tee "$policy" >/dev/null && $SUDO chmod 755 "$policy" && ours=1
    trap '[ -n "$ours" ] && $SUDO rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  if [ -n "$ours" ]; then $SUDO rm -f "$policy"; ours=""; fi
fi
# Debian's promtool is built without kubernetes_sd_configs; the config check needs upstream's.
bash "$here/tests/prom/promtool/build.sh"
bash "$here/drs_prom/testbed/k8s_recipe/build.sh"
# kubernetes-sigs/descheduler, the rebalancer drs-prom rebalance is measured against, built like the binaries above.
bash "$here/drs_prom/testbed/descheduler_recipe/build.sh" >/dev/null
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
