# Entry points. Everything is installed by scripts/setup.sh into ${JAXT_CACHE:-~/.cache/jax-training}.
SHELL := /bin/bash
JAXT_CACHE ?= $(HOME)/.cache/jax-training
VENV ?= $(JAXT_CACHE)/venv
PY := $(VENV)/bin/python
# A local copy of the MNIST files; the demo reads it through a file:// mirror (sha256-verified).
MNIST_DIR ?= $(abspath ../shared/data/mnist)
DEMO_FILE ?= variables/examples/cpu-local.json
DEMO_SET := $(if $(wildcard $(MNIST_DIR)/train-images-idx3-ubyte.gz),--set data.mirror=file://$(MNIST_DIR)/)

# Where `make install` links the commands (on PATH in a default Debian/Ubuntu login shell).
BINDIR ?= $(HOME)/.local/bin

.PHONY: demo install test test-fast setup sync-schema golden bench chart-docs help
help:
	@echo "make demo        set up, then train MNIST locally as 2 processes ($(DEMO_FILE))"
	@echo "make install     set up, then link jaxgen and jax-trainer into $(BINDIR)"
	@echo "make test        set up every tool, then run every test tier (unit, chart, trainer, e2e)"
	@echo "make test-fast   the tiers that need no cluster or SLURM"
	@echo "make sync-schema write the Kubernetes definitions and the models' settings into variables/schema.json; copy it, the exit codes, the per-process env names, the trainer's flags, the models' and the targets' facts into the chart"
	@echo "make chart-docs  regenerate the chart README values table and the values.yaml comments (from the schema)"
	@echo "make golden      regenerate the golden renders (review the diff by hand)"
	@echo "make bench       run the benchmark harness (JSON on stdout)"

setup:
	scripts/setup.sh all

demo:
	scripts/setup.sh python
	$(VENV)/bin/jaxgen run --local $(DEMO_FILE) $(DEMO_SET)

install:
	scripts/setup.sh python
	mkdir -p "$(BINDIR)"
	ln -sfn "$(VENV)/bin/jaxgen" "$(BINDIR)/jaxgen"
	ln -sfn "$(VENV)/bin/jax-trainer" "$(BINDIR)/jax-trainer"
	@echo "jaxgen and jax-trainer are in $(BINDIR)"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "$(BINDIR) is not on PATH: export PATH=\"$(BINDIR):\$$PATH\"";; esac

test: setup
	$(PY) -m pytest tests

test-fast:
	scripts/setup.sh python tools
	$(PY) -m pytest tests -m "not e2e"

sync-schema:
	$(PY) scripts/kubernetes-definitions.py
	$(PY) scripts/model-schema.py
	cp variables/schema.json charts/jax-training/values.schema.json
	$(PY) -m trainer.exit_codes > charts/jax-training/files/exit-codes.json
	$(PY) -m trainer.cluster > charts/jax-training/files/process-env.json
	$(PY) -m trainer.config > charts/jax-training/files/trainer-flags.json
	$(PY) -c 'from trainer import models; print(models.facts_json(), end="")' > charts/jax-training/files/models.json
	$(PY) -m generator.targets > scripts/lib/targets.sh
	$(PY) -c 'from generator import targets; print(targets.chart_rows(), end="")' > charts/jax-training/files/targets.json
	$(PY) -c 'from generator import checks; print(checks.warnings_json(), end="")' > charts/jax-training/files/warnings.json
	$(PY) -c 'from generator import images; print(images.variants_json(), end="")' > charts/jax-training/files/image-variants.json
	$(PY) scripts/chart-version.py

chart-docs:
	$(PY) scripts/chart-readme.py

golden:
	$(PY) -m pytest tests/generator/test_golden.py --update-golden

bench:
	scripts/setup.sh python
	$(PY) -m benchmarks
