# mqforensics — every target sets up what it needs itself (see README).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(abspath $(VENV))/bin/python

# Spark must bind to loopback and its Python workers must run this venv's interpreter
# (otherwise they pick the system python3, which lacks pyarrow).
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(PY)
export PYSPARK_DRIVER_PYTHON := $(PY)

.PHONY: setup demo test test-unit lint fetch prepare-spark lab bench services services-down clean

# Our modules' bytecode is written here (only what changed since the last time). An interpreter
# under PYTHONDONTWRITEBYTECODE (set in many containers and CI images) never writes it, so every
# process (command, notebook kernel, Spark Python worker, test) would compile each module it
# imports from source again.
setup: $(VENV)/.installed
	@$(PY) -m compileall -q -j 0 mqforensics bench datasets tests > /dev/null

# Re-installs only when pyproject.toml changed. The package and its dependencies are installed by
# uv (from PyPI, into the venv first): 40 s where pip took 100 on a clean clone, its cache warm.
# Downloads are cached under ~/.cache (uv's, pip's) and ~/.m2, so a rebuilt venv is quick too.
# uv writes no bytecode unless asked: compiled at install, `import great_expectations` takes
# 5.5 s where it took 9.9 s compiling pandas, SciPy, Altair and GX from source in every process.
UV_VERSION := 0.13.9

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(abspath $(VENV))/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e ".[dev]"
	@touch $@

demo: setup
	$(PY) -m mqforensics demo --out out/demo

lint: setup
	$(PY) -m ruff check mqforensics tests datasets bench docs/images
	$(PY) -m ruff format --check mqforensics tests datasets bench docs/images
	$(PY) -m mypy

test-unit: prepare-spark
	$(PY) -m pytest tests/unit -q

# The servers' runtimes the tests start (Cassandra jars, the slimta virtualenv, Debian packages).
fetch: setup
	$(PY) -m mqforensics services fetch

# The Spark driver JVM's class data archive (once per JDK and Spark, in ~/.cache/mqforensics):
# every later Spark session, command, notebook kernel and test, starts seconds sooner.
prepare-spark: setup
	$(PY) -m mqforensics prepare-spark

# Everything: lint, the servers' runtimes and the Spark archive (the three side by side), unit
# tests, integration tests against real servers that the test session starts on 127.0.0.1 once
# and stops (two workers share them; a module runs on one worker whole), and in the same run the
# validation notebooks under nbmake as a scheduler runs them. The analysts' notebooks are
# executed by tests/integration/test_report_chromium.py, which then reads their exports.
test: setup
	$(MAKE) --no-print-directory -j 3 --output-sync=target lint fetch prepare-spark
	$(PY) -m pytest tests notebooks/validation --nbmake -v --durations=15 -n 2

# Benchmarks against baselines measured in the same run (not part of `make test`, which runs
# them in smoke mode); results in bench/results/full.json and docs/benchmarks.md.
bench: setup
	$(PY) -m mqforensics services fetch
	$(PY) -m bench.run

# JupyterLab saves the explorers' widget state with a notebook (notebooks/lab/overrides.json), so
# a saved notebook reopens showing the views the analyst left, not "model not found".
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings

lab: setup
	@mkdir -p notebooks $(LAB_SETTINGS)
	@cp notebooks/lab/overrides.json $(LAB_SETTINGS)/overrides.json
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser --notebook-dir=notebooks \
		$(if $(filter 0,$(shell id -u)),--allow-root)

# Long-lived servers for notebooks and manual work; state and logs in .services/.
services: setup
	$(PY) -m mqforensics services up

services-down:
	@if test -x $(PY); then $(PY) -m mqforensics services down; fi

clean: services-down
	rm -rf out .pytest_cache .ruff_cache .mypy_cache
