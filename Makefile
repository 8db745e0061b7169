# `make run` serves the API on 127.0.0.1:5000; `make test` runs the whole suite.
# Both create the virtual environment and install first what they need: `make run` the
# serving dependencies only, `make test` the development tools too (`make install`).

PYTHON ?= python3
VENV ?= .venv
HOST ?= 127.0.0.1
PORT ?= 5000
# Empty: gunicorn.conf.py picks two workers per CPU, plus one.
WORKERS ?=
BIN := $(VENV)/bin

.PHONY: install run dev test screenshots lint bench clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Python 3.11 or newer is needed: make PYTHON=python3.12 ...")'
	$(PYTHON) -m venv --upgrade-deps $(VENV)

# Two installs, each redone whenever pyproject.toml changes: what serving needs (`make run`,
# `make dev`: the project, with the Redis client that many hosts count with), and on top of
# it the development tools (`make install`, `make test`, `make lint`: pytest, ruff, the
# browser driver, ...), which a server never imports. The workers' interpreter is optimized
# (-OO, below): their bytecode is compiled here, as pip compiles the plain one (a worker that
# compiled its imports itself would peak 3 MiB higher).
SERVING := $(VENV)/.installed-serving
DEVELOPMENT := $(VENV)/.installed-dev

$(SERVING): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[redis]'
	$(BIN)/python -OO -m compileall -q -j 0 $(VENV)/lib app >/dev/null
	@touch $@

$(DEVELOPMENT): pyproject.toml $(SERVING)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

install: $(DEVELOPMENT)

# gunicorn's interpreter optimized (-OO): a worker holds no docstring, 4.8 MiB less each
# (bench/README.md, "A worker's memory"); the commands (flask, the first start) keep theirs.
run: $(SERVING)
	$(BIN)/python -OO -m compileall -q app
	$(BIN)/flask --app app db upgrade
	HOST=$(HOST) PORT=$(PORT) $(if $(WORKERS),WEB_CONCURRENCY=$(WORKERS)) $(BIN)/python -OO -m gunicorn wsgi:app

dev: $(SERVING)
	$(BIN)/flask --app app first-start
	$(BIN)/flask --app app run --debug --host $(HOST) --port $(PORT)

# The suite in TEST_PROCESSES processes, a module to each (pyproject.toml's --dist loadfile):
# its tests mostly wait on servers and browsers, so more processes than cores pay
# (docs/contributing.md has the timings). TEST_PROCESSES=0 runs it in this one process.
TEST_PROCESSES ?= 6

# The JavaScript the page's and MCP's tests drive (axe-core, the MCP Inspector), pinned by
# their lock files and installed where npm is (without npm, those tests say they were skipped).
NODE_PINS := tests/server/axe/node_modules/.package-lock.json \
	tests/server/mcp_inspector/node_modules/.package-lock.json

tests/server/%/node_modules/.package-lock.json: tests/server/%/package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --prefix tests/server/$*

# Python and pytest keep their bytecode for the run even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): without it every test process rewrites the assertions of every
# test module and of hypothesis's and schemathesis's (11.3 s of CPU to collect, 4.9 s with
# it kept), and every gunicorn worker and flask command compiles the application again.
test: install $(if $(shell command -v npm),$(NODE_PINS))
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_PROCESSES)

# The README's pictures of the page, retaken by its browser tests (needs Chromium).
screenshots: install
	SCREENSHOTS=docs/screenshots $(BIN)/pytest --no-cov tests/server/test_page.py

# The service against bare Flask under gunicorn, with wrk, then each worker's peak memory
# after a mixed run of every endpoint (bench/memory.py, which runs without wrk too:
# python -m bench.memory); settings in bench/README.md.
bench: install
	@command -v wrk >/dev/null || { echo "make bench needs wrk: apt-get install -y wrk" >&2; exit 1; }
	$(BIN)/python -m bench.run

# ruff; import-linter (no import cycle in app/); bandit on app/ (settings in pyproject.toml);
# pip-audit of the installed dependencies.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo --no-cache pyproject.toml
	$(BIN)/bandit --quiet --configfile pyproject.toml --recursive app
	.ci/pip-audit $(BIN)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .coverage
