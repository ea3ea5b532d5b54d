"""The closed-loop testbed: real control plane, twin kubelets over the simulator, real Prometheus.

Modules, one job each: build (find/build the cached Kubernetes binaries), process (child
processes, process groups, stop-everything on exit and Ctrl-C), pki (certificates and
kubeconfigs), controlplane (etcd + kube-apiserver + kube-scheduler), prometheus (a real
Prometheus on loopback), kubelet (the twin kubelet feeding LiveCluster), cadvisor (its
/metrics/cadvisor pages), pod_owners (pod names and owners as controllers make them), driver (the
workload), schedulers (the schedulers under test), judge (PromQL-only metrics), runner
(one closed-loop run per scheduler and seed, the report).
"""
