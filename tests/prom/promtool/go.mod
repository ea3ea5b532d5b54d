// Builds upstream promtool with only the file, http and kubernetes service discoveries
// (Debian's promtool lacks kubernetes_sd_configs). See build.sh.
module drs-prom/tests/prom/promtool

go 1.22

require github.com/prometheus/prometheus v0.54.1
