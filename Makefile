# The interface: `make run` (local system with sample jobs), `make test`, `make lint`, `make synth`, `make bench`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: setup test lint run synth bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --silent --no-audit --no-fund
	touch $@

setup: $(VENV)/.installed $(if $(wildcard package.json),node_modules/.installed)

test: setup
	$(PY) -m pytest -n 2 --dist loadfile

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Local mode needs only the Python environment (no Node.js/CDK): the whole system on an embedded moto.
run: $(VENV)/.installed
	$(VENV)/bin/jobsched local --demo

synth: setup
	npx cdk synth --quiet

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) node_modules cdk.out .jobsched
