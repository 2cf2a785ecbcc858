# Parley: `make run` to try it, `make test` to check it. Both set up everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000

.PHONY: run test bench lint format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements-dev.txt requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py seed_demo
	@echo "Parley is at http://127.0.0.1:$(PORT)/  (API docs: /api/docs/, admin: /admin/)"
	$(BIN)/daphne -b 127.0.0.1 -p $(PORT) config.asgi:application

test: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run.py

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache test-artifacts
