"""A testbed run of the constraints scenario on real parts (kube-apiserver, the real kube-scheduler, drs-prom as its
own process): its batch pods mount claims bound to zonal PersistentVolumes the driver created, and neither scheduler
runs one outside its volume's zone, counted from the apiserver's pods, claims and volumes (testbed.violations).

Short: 12 pods, one seed, at 10x, no bench comparison. Numbers are printed, not asserted as limits."""

from dataclasses import replace

import pytest

from drs_prom.scheduler.watch import kube_storage
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.zonal_volumes import pod_volume
from drs_prom.testbed import judge, process, zonal_claims
from drs_prom.testbed.api import run_testbed
from drs_prom.testbed.closed_loop import workload_for
from drs_prom.testbed.driver import RUN_LABEL, WorkloadDriver
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

PODS = 12


def test_no_scheduler_runs_a_pod_outside_its_volume_zone(k8s_bins, tmp_path, capsys):
    zones = workload_for(load_scenario("constraints"), 0, PODS).volume_zone
    assert zones is not None and sum(bool(z) for z in zones) >= 3  # the run has pods with zonal volumes
    lines: list[str] = []
    running = process.live_processes()
    report = run_testbed(
        "constraints",
        seeds=[0],
        pods=PODS,
        speed=10.0,
        schedulers=["kube-scheduler", "drs"],
        out_dir=tmp_path / "out",
        workdir=tmp_path / "work",
        bench=False,
        echo=lines.append,
    )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    for name, row in report["schedulers"].items():
        run = row["runs"][0]
        assert (row["bound"], row["completed"], row["lost"]) == (PODS, PODS, 0), name  # the volume pods ran too
        assert run["violations_by_kind"]["volume_zone"] == 0, name
        assert run["violations"] == 0, (name, run["violations_by_kind"])
    assert process.live_processes() == running


def test_the_driver_pair_is_bound_as_created_and_deleted_with_the_run(
    control_plane, k8s_admin_client, controller_manager
):
    """On the real apiserver with the real PV controller: the volume and claim the driver creates are Bound to each
    other as created (no provisioner), read back as the simulator's claim and volume, and the run's clean-up deletes both
    (the volume is cluster-scoped: deleting the namespace would leave it)."""
    from kubernetes import client

    ns = "volzone-pair"
    control_plane.create_namespace(ns)
    core = client.CoreV1Api(k8s_admin_client)
    wl = workload_for(load_scenario("constraints"), 0, PODS)
    assert wl.volume_zone is not None
    i = next(k for k, z in enumerate(wl.volume_zone) if z)
    made = zonal_claims.manifests(wl, i, ns, {RUN_LABEL: ns})
    assert made is not None
    pv, pvc = made
    driver = WorkloadDriver(k8s_admin_client, wl, ns, "default-scheduler", 10.0, ns)  # its thread never started
    assert driver.create_volume(pv, pvc), driver.result.errors
    claim, volume = pod_volume(ns, wl.names[i], wl.volume_zone[i])

    def phases() -> tuple[str, str]:
        got_pv = core.read_persistent_volume(volume.name)
        got_pvc = core.read_namespaced_persistent_volume_claim(claim.name, ns)
        return got_pv.status.phase, got_pvc.status.phase

    wait_for(lambda: phases() == ("Bound", "Bound"), 60, "the PV controller to report the pair Bound")
    claims, pvs = judge.list_volumes(k8s_admin_client, ns, f"{RUN_LABEL}={ns}")
    assert [replace(kube_storage.to_claim_info(c), uid="") for c in claims] == [claim]  # uid: the apiserver's
    assert [kube_storage.to_volume_info(v).node_affinity for v in pvs] == [volume.node_affinity]
    zonal_claims.delete_run_volumes(core, ns, f"{RUN_LABEL}={ns}")

    def deleted() -> bool:  # gone, or Terminating behind the protection finalizers no running controller removes
        claims, pvs = judge.list_volumes(k8s_admin_client, ns, f"{RUN_LABEL}={ns}")
        return all(o["metadata"].get("deletionTimestamp") for o in [*claims, *pvs])

    wait_for(deleted, 30, "the run's claim and volume to be deleted")
