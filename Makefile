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
# gitlab-ci-local runs the generated .gitlab-ci.yml in the tests (npm package). 4.75.1 fails on Node 20
# (it calls Node 22's Set.prototype.union); 4.70.1 runs there. Without npm, setup says so and those tests skip.
NPM ?= npm
GITLAB_CI_LOCAL ?= gitlab-ci-local@4.70.1
TOOLS ?= .tools

.PHONY: setup test test-unit demo bench bench-lock bench-image bench-smoke bench-faults bench-realworld bench-nvidia-smi world world-down clean

$(BIN)/envbuild: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q $(TORCH_PIP_ARGS) $(TORCH_SPEC)
	touch $@

$(TOOLS)/node_modules/.bin/gitlab-ci-local:
	@if command -v $(NPM) >/dev/null 2>&1; then \
		$(NPM) install --prefix $(TOOLS) --no-audit --no-fund --no-save --silent $(GITLAB_CI_LOCAL); \
	else \
		echo "setup: no npm here: the gitlab-ci-local tests will skip (apt-get install npm)"; \
	fi

setup: $(BIN)/envbuild $(TOOLS)/node_modules/.bin/gitlab-ci-local

test-unit: setup
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

test: setup
	bash tests/run-all.sh $(PYTEST_ARGS)

demo: setup
	DEMO=$(DEMO) bash tests/world/demo.sh

bench: bench-lock bench-image bench-smoke

bench-lock: setup
	$(BIN)/python -m bench.lock

bench-image: setup
	bash tests/world/with-world.sh $(BIN)/python -m bench.image

# The fault catalogue end to end plus kill -9 trials of lock, image and smoke (a few minutes).
bench-faults: setup
	bash tests/world/with-world.sh $(BIN)/python -m bench.faults

bench-smoke: setup
	bash tests/world/with-world.sh $(BIN)/python -m bench.smoke

# `envbuild explain` scored on its answers (cause and fix) on the realworld, device and blind corpora, dev and
# held-out apart (the old family rule printed beside), then on bad input:
# a 20 MB log (<= 2 s), a 1 GiB file, random bytes, an endless stdin, other encodings (about a minute).
bench-realworld: setup
	$(BIN)/python -m bench.realworld

bench-nvidia-smi: setup
	$(BIN)/python -m bench.nvidia_smi

world: setup
	bash tests/world/up.sh

world-down:
	bash tests/world/down.sh

clean:
	rm -rf build dist $(VENV) $(TOOLS)
