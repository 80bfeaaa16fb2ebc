# Entry points. scripts/setup.sh installs Python into this checkout's own virtualenv (.venv, or
# JAXT_VENV / VENV=DIR), and the tools, keyed by content, into ${JAXT_CACHE:-~/.cache/jax-training}.
SHELL := /bin/bash
VENV ?= $(or $(JAXT_VENV),$(CURDIR)/.venv)
export JAXT_VENV := $(VENV)
export JAXT_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/jax-training
PY := $(VENV)/bin/python
# A local copy of the MNIST files; the demo reads it through a file:// mirror (sha256-verified).
MNIST_DIR ?= $(abspath ../shared/data/mnist)
DEMO_FILE ?= variables/examples/cpu-local.json
DEMO_SET := $(if $(wildcard $(MNIST_DIR)/train-images-idx3-ubyte.gz),--set data.mirror=file://$(MNIST_DIR)/)

# Where `make install` links the commands (on PATH in a default Debian/Ubuntu login shell).
BINDIR ?= $(HOME)/.local/bin

.PHONY: demo install test test-fast setup generate check-generated golden bench help
help:
	@echo "make demo        set up, then train MNIST locally as 2 processes ($(DEMO_FILE))"
	@echo "make install     set up, then link jaxgen and jax-trainer into $(BINDIR), and helm: the one on PATH"
	@echo "                 if it is Helm 4 or newer, else the tested one (built with Go once, about 10 minutes)"
	@echo "make test        set up every tool and run every test tier (unit, chart, trainer, e2e) in three lanes"
	@echo "                 (slurm, kubernetes, rest) at once, the cluster binaries building meanwhile"
	@echo "                 (scripts/test.sh --setup; JAXT_TEST_LANES=1: set up, then one session)"
	@echo "make test-fast   the tests that need no cluster or SLURM, less those marked slow"
	@echo "make generate    write every generated file from its one home (scripts/generate.py): the chart's"
	@echo "                 values.yaml, values.schema.json, files/*.json, README table and versions; scripts/lib/*.sh"
	@echo "make check-generated  fail if a generated file is not what make generate would write (writes nothing)"
	@echo "make golden      regenerate the golden renders, the tests' oracle (review the diff by hand)"
	@echo "make bench       run the benchmark harness (JSON on stdout)"

setup:
	scripts/setup.sh all

demo:
	scripts/setup.sh demo
	$(VENV)/bin/jaxgen run --local $(DEMO_FILE) $(DEMO_SET)

install:
	BINDIR="$(BINDIR)" scripts/setup.sh install

test:
	scripts/test.sh --setup

test-fast:
	scripts/setup.sh dev tools
	$(PY) -m pytest tests -m "not e2e and not slow"

generate:
	$(PY) scripts/generate.py

check-generated:
	$(PY) scripts/generate.py --check

golden:
	$(PY) -m pytest tests/generator/test_golden.py --update-golden

bench:
	scripts/setup.sh python
	$(PY) -m benchmarks
