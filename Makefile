# Parley: `make run` to try it, `make test` to check it. Both set up everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000

# The browser tests drive Debian's Chromium through Playwright: nothing is downloaded at test time.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test bench bench-all fuzz soak lint format clean chromium services cluster deploy clients

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.installed

# Client software Parley did not write, for the tests that drive it (tests/clients/): npm packages
# from its lock file, and Python clients in a virtualenv of their own (they need MCP 2.x).
CLIENTS := .venv-clients
$(CLIENTS)/.installed: tests/clients/requirements.txt
	$(PYTHON) -m venv $(CLIENTS)
	$(CLIENTS)/bin/pip install --quiet --upgrade pip
	$(CLIENTS)/bin/pip install --quiet -r tests/clients/requirements.txt
	touch $@

tests/clients/node_modules/.installed: tests/clients/package.json tests/clients/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  echo "Installing Node.js and npm (the machine's package) for the client tests..."; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    nodejs npm >/dev/null; }
	@node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' || { \
	  echo "The client tests need Node.js 20.19 or later (this machine has $$(node --version))." \
	    "Debian 12's own package is 18: install Node.js 20 or 22 (e.g. NodeSource's packages)."; exit 1; }
	npm ci --prefix tests/clients --no-audit --no-fund --loglevel=error
	touch $@

clients: $(CLIENTS)/.installed tests/clients/node_modules/.installed

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py seed_demo
	@echo "Parley is at http://127.0.0.1:$(PORT)/  (API docs: /api/docs/, admin: /admin/)"
	PARLEY_PUBLIC_URL=$${PARLEY_PUBLIC_URL:-http://127.0.0.1:$(PORT)} \
	  $(BIN)/daphne -b 127.0.0.1 -p $(PORT) config.asgi:application

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Chromium (Debian's package) for the browser tests..."; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core >/dev/null; }

# PostgreSQL, PgBouncer, Redis and HAProxy from Debian's packages, for the second half of
# `make test` and `make cluster` (the packages' own services are not used: each run starts its own).
services:
	@{ ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v redis-server >/dev/null \
	  && [ -x /usr/sbin/pgbouncer ] && [ -x /usr/sbin/haproxy ]; } || { \
	  echo "Installing PostgreSQL, PgBouncer, Redis and HAProxy (Debian's packages)..."; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    postgresql pgbouncer redis-server haproxy >/dev/null; }

# Every test on SQLite and, at the same time, every test but the browser's again on PostgreSQL
# (behind PgBouncer) with Redis, each started for the run on loopback: four passes at once, each
# backend's split in two (see tests/passes.py). The passes share nothing. The first prints as it
# goes; the others' output, also in test-artifacts/test-<pass>.log, follows once all have ended.
test: $(VENV)/.installed-dev chromium services clients
	$(BIN)/ruff check .
	$(BIN)/python -m tests.passes

cluster: $(VENV)/.installed services
	$(BIN)/python -m ops.cluster

# Replace the running cluster's processes one by one (start, wait until ready, drain the old).
deploy: $(VENV)/.installed
	$(BIN)/python -m ops.cluster deploy

# Every speed figure as a ratio to its bare twin measured in the same run, on SQLite with one
# process and on PostgreSQL + Redis with two (bench/ratios.py, about 7 minutes); `make bench-all`
# adds every other stage of the benchmark (bench/run.py: throughput, replay, Chromium, cluster...).
bench: $(VENV)/.installed-dev services
	$(BIN)/python -m bench.ratios

bench-all: bench
	$(BIN)/python bench/run.py

# The fuzzers of `make test` (on PostgreSQL, the stricter backend), twenty times longer; a new
# seed with PARLEY_FUZZ_SEED=n.
fuzz: $(VENV)/.installed-dev services
	PARLEY_FUZZ_SCALE=$${PARLEY_FUZZ_SCALE:-20} $(BIN)/python -m ops.servers -- \
	    $(BIN)/pytest -p no:cacheprovider tests/fuzz

# Minutes of sockets reconnecting at random while turns stream, ask and get answered.
soak: $(VENV)/.installed-dev services
	$(BIN)/python bench/soak.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(CLIENTS) tests/clients/node_modules var .pytest_cache .ruff_cache test-artifacts
