"""Suite-wide settings. Server fixtures live beside the tests that use them
(tests/prom/fixtures.py, tests/k8s/fixtures.py) and are shared through pytest_plugins."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

# One session Prometheus / exporter set and one control plane, shared by every directory.
pytest_plugins = ["tests.prom.fixtures", "tests.k8s.fixtures"]
