"""pytest fixtures for the real Kubernetes control-plane harness.

Enable with ``pytest_plugins = ["tests.k8s.fixtures"]`` in tests/conftest.py.

* ``k8s_bins``          (session) Path of the bin dir with kube-apiserver, kube-scheduler,
                        kubectl, etcd; runs the packaged recipe drs_prom/testbed/k8s_recipe/build.sh (no-op when built). A failed
                        build FAILS the test with one line saying why (it is not skipped).
* ``control_plane``     (session) a started ``harness.ControlPlane``; stopped at session end.
* ``k8s_admin_client``  (session) ``kubernetes.client.ApiClient`` authenticated as admin.
* ``controller_manager`` (module) the real kube-controller-manager on ``control_plane`` with the
                        disruption, replicaset, garbage-collector and persistentvolume-binder controllers;
                        stopped after the module, so tests that do not ask for it stay fast and untouched
                        (its garbage collector would delete pods whose owners do not exist).
* ``fake_nodes``        (function) ``fake_nodes(name, **create_fake_node kwargs) -> name``;
                        every node it made is deleted after the test, because nodes are
                        cluster-wide and the control plane is shared by the whole session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drs_prom.testbed.build import ControlPlaneError, build_binaries
from drs_prom.testbed.controlplane import ControlPlane


@pytest.fixture(scope="session")
def k8s_bins():
    try:
        return build_binaries()
    except ControlPlaneError as e:
        pytest.fail(f"k8s test binaries unavailable: {e}", pytrace=False)


@pytest.fixture(scope="session")
def control_plane(k8s_bins):
    cp = ControlPlane(k8s_bins)
    try:
        try:
            cp.start()
        except ControlPlaneError as e:
            pytest.fail(f"k8s control plane failed to start: {e}", pytrace=False)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def k8s_admin_client(control_plane):
    client = control_plane.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def controller_manager(control_plane):
    try:
        proc = control_plane.start_kube_controller_manager()
    except ControlPlaneError as e:
        pytest.fail(f"kube-controller-manager failed to start: {e}", pytrace=False)
    try:
        yield proc
    finally:
        proc.stop()
        if proc in control_plane.controller_managers:
            control_plane.controller_managers.remove(proc)


@pytest.fixture
def fake_nodes(control_plane) -> Iterator[Callable[..., str]]:
    from kubernetes import client

    core = client.CoreV1Api(control_plane.admin_client)
    made: list[str] = []

    def make(name: str, **kw: Any) -> str:
        control_plane.create_fake_node(name, **kw)
        made.append(name)
        return name

    try:
        yield make
    finally:
        for name in made:
            try:
                core.delete_node(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
