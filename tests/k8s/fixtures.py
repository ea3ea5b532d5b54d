"""pytest fixtures for the real Kubernetes control-plane harness.

Enable with ``pytest_plugins = ["tests.k8s.fixtures"]`` in tests/conftest.py.

* ``k8s_bins``          (session) Path of the bin dir with kube-apiserver, kube-scheduler,
                        kubectl, etcd; runs tests/k8s/build.sh (no-op when built). A failed
                        build FAILS the test with one line saying why (it is not skipped).
* ``control_plane``     (session) a started ``harness.ControlPlane``; stopped at session end.
* ``k8s_admin_client``  (session) ``kubernetes.client.ApiClient`` authenticated as admin.
"""

from __future__ import annotations

import pytest

from tests.k8s.harness import ControlPlane, ControlPlaneError, build_binaries


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
