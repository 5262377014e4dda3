# The interface: `make run` (local system with sample jobs), `make test`, `make lint`, `make synth`, `make bench`,
# `make fuzz` (the model-based test of the promises, long).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: setup test lint run synth bench fuzz clean

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

# The model-based test of the promises, long, on the in-memory fakes: 3000 examples of up to 60 steps (make
# test runs 150 of 30 on the fakes and 2 on moto). JOBSCHED_FUZZ_BACKENDS=moto (or memory,moto) for moto.
fuzz: setup
	JOBSCHED_FUZZ_EXAMPLES=$${JOBSCHED_FUZZ_EXAMPLES:-3000} JOBSCHED_FUZZ_STEPS=$${JOBSCHED_FUZZ_STEPS:-60} \
	JOBSCHED_FUZZ_BACKENDS=$${JOBSCHED_FUZZ_BACKENDS:-memory} \
	JOBSCHED_FUZZ_SEED=$${JOBSCHED_FUZZ_SEED:-random} $(PY) -m pytest tests/integration/test_promises_model.py -x

clean:
	rm -rf $(VENV) node_modules cdk.out .jobsched
