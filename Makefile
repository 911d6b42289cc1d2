# envbuild developer entry points. `make demo` runs the main job end to end on the offline
# default; `make test` installs and starts what the tests need, runs them all, stops what it started.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU torch keeps `envbuild smoke --local` runnable on machines without a GPU. Users behind the
# public index add e.g. TORCH_PIP_ARGS="--index-url <their CPU wheel index>" to avoid the CUDA build.
TORCH_SPEC ?= torch==2.13.0 numpy
TORCH_PIP_ARGS ?=
WORLD ?= .world
PYTEST_ARGS ?=

.PHONY: setup test test-unit demo bench bench-lock bench-image bench-smoke world world-down clean

$(BIN)/envbuild: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) $(TORCH_SPEC)
	touch $@

setup: $(BIN)/envbuild

test-unit: setup
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

test: setup
	bash tests/run-all.sh $(PYTEST_ARGS)

demo: setup
	bash tests/world/demo.sh

bench: bench-lock bench-image bench-smoke

bench-lock: setup
	$(BIN)/python -m bench.lock

bench-image: setup
	bash tests/world/with-world.sh $(BIN)/python -m bench.image

bench-smoke: setup
	bash tests/world/with-world.sh $(BIN)/python -m bench.smoke

world: setup
	bash tests/world/up.sh

world-down:
	bash tests/world/down.sh

clean:
	rm -rf build dist $(VENV)
