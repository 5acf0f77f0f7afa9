# The two commands of the README: `make run` (the recording proxy on the embedded defaults)
# and `make test` (lint, types, import direction, tests). Both build .venv on first use.
# `make run PORT=9090` listens elsewhere, `make run ARGS='--upstream-ca corp.pem'` passes options on to
# `flightlog proxy`; `make install` puts `flightlog` on PATH.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 || command -v python3.13 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
HOST ?= 127.0.0.1
PORT ?= 8080
PREFIX ?= $(HOME)/.local
ARGS ?=
# pip's output passed through, and a line every few seconds while it unpacks in silence
PIP := $(BIN)/python scripts/pip_progress.py $(VENV) -- $(BIN)/python -u -m pip install --disable-pip-version-check \
	--progress-bar on

.PHONY: run install test lint typecheck imports pytest bench venv clean

# Two stamps: `make run` installs only what running needs (flightlog and its dependencies, with pip's
# progress shown: the first install brings 91 packages); `make test` adds the dev extra on top
# (the test and lint tools, and the extras loaded on first use: `web`, `s3`, `otlp`, `datasette`).
$(RUN_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || \
		{ echo "flightlog needs Python >= 3.12 (found $$($(PYTHON) --version)); set PYTHON=..."; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "flightlog: installing what running needs into $(VENV) (first run, or pyproject.toml changed)"
	$(PIP) -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	@echo "flightlog: installing the test and lint tools (the dev extra) into $(VENV)"
	$(PIP) -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/flightlog proxy --listen $(HOST):$(PORT) $(ARGS)

# `flightlog` on PATH: a link in $(PREFIX)/bin to this checkout's .venv (re-run after moving it).
install: $(RUN_STAMP)
	mkdir -p $(PREFIX)/bin
	ln -sf $(CURDIR)/$(BIN)/flightlog $(PREFIX)/bin/flightlog
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "add $(PREFIX)/bin to PATH to run flightlog";; esac

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/python scripts/timing_figures.py

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_cycles.py
	$(BIN)/python scripts/module_sizes.py

# The tests mostly wait on subprocesses (proxies, clients, servers), so they run on JOBS pytest-xdist
# workers, a test file per worker (its module fixtures, such as a shared proxy, start once). The
# `serial` tests (they restart the shared PostgreSQL server) run afterwards, alone.
# One worker more than the cores: a worker mostly waits on its subprocesses, so one more keeps the
# cores busy (the figures are in the commit that set it).
JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))
pytest: $(STAMP)
	$(BIN)/pytest -q -n $(JOBS) --dist loadfile -m 'not serial' $(PYTEST_ARGS)
	$(BIN)/pytest -q -p no:xdist -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: the selection had none

test: lint typecheck imports pytest

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

# .test-cache: the tests' shared cache (npm, pip, Phoenix's environment; tests/conftest.py).
clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .test-cache
