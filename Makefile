# The interface: `make run` (local system with sample jobs and the web console), `make test`, `make lint`, `make synth`, `make bench`,
# `make fuzz` (the model-based test of the promises, long).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: setup browser test lint run synth bench fuzz clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --silent --no-audit --no-fund
	touch $@

setup: $(VENV)/.installed $(if $(wildcard package.json),node_modules/.installed)

# The web console's browser tests drive Debian's chromium and chromium-driver (tests/e2e/browser.py): installed
# here with apt-get when missing (as root, else with sudo); when they cannot be, `make test` stops saying so
# (the browser tests never skip).
BROWSER_BINS := /usr/bin/chromium /usr/bin/chromedriver
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

browser:
	@missing=; for bin in $(BROWSER_BINS); do test -x $$bin || missing="$$missing $$bin"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing chromium and chromium-driver for the console's browser tests (missing:$$missing)"; \
	  command -v apt-get >/dev/null || { echo "ERROR: no apt-get here: install Chromium and its driver at $(BROWSER_BINS) for the browser tests" >&2; exit 1; }; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
	    || { echo "ERROR: could not install chromium and chromium-driver with apt-get: the browser tests cannot run" >&2; exit 1; }; \
	  for bin in $(BROWSER_BINS); do test -x $$bin || { echo "ERROR: $$bin is still missing after apt-get" >&2; exit 1; }; done; \
	fi

test: setup browser
	$(PY) -m pytest -n 2 --dist loadfile

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Local mode needs only the Python environment (no Node.js/CDK): the whole system on SQLite and an embedded moto.
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
