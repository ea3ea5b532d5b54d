# The two commands a newcomer runs (see README):  make demo   and   make test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-deps lint docs venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# the base install: serving, exporting and benchmarking need no TensorFlow (docs/install.md)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# everything: the [test] extra pulls in [train] (TensorFlow) and the linters
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(VENV)/.installed $@

venv: $(VENV)/.installed

## demo: install and run the benchmark on the embedded drs-paper simulator with the shipped model
demo: $(VENV)/.installed
	$(BIN)/drs-prom demo

## test-deps: Prometheus, node_exporter, VictoriaMetrics, openssl (Debian; root for apt-get) and etcd/kube-apiserver/
##            kube-controller-manager/kube-scheduler/kubectl/promtool/helm/descheduler
## (built once with Go >= 1.26 into ~/.cache/drs-prom: 0.5 GB of binaries; up to 6.6 GB of Go caches and temporary
## files while they build); never stops or starts a service of the host
test-deps:
	scripts/install-test-deps.sh

## lint: ruff (rules + format), mypy (strict on the pure layers), import-linter contracts, no import cycles, module sizes,
##       every package in a layer
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_cycles.py
	$(BIN)/python scripts/module_sizes.py
	$(BIN)/python scripts/layer_coverage.py

## docs: the documentation site (docs/, mkdocs.yml) into site/; --strict fails on any broken link or anchor
docs: $(VENV)/.installed-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## test: lint, the docs, everything the suite needs, then the whole suite (integration tests included)
test: lint docs $(VENV)/.installed-test test-deps
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache site
