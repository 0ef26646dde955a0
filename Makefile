# Tandem: the two commands a newcomer needs are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
export TANDEM_VENV := $(abspath $(VENV))

.PHONY: demo test bench bench-gpu lint install services migrate stop engine desktop-image

install:
	@deploy/dev.sh install

services:
	@deploy/dev.sh services

migrate: install services
	@$(PY) manage.py migrate --noinput -v 0

## demo: install what is missing, start every service, seed a demo project, print the URL and logins
demo: migrate desktop-image
	@$(PY) manage.py demo_model
	@deploy/dev.sh start
	@$(PY) manage.py seed_demo
	@echo ""
	@echo "Tandem is running at http://127.0.0.1:$${TANDEM_PORT:-8000}/  (API docs: /api/docs/, admin: /admin/)"
	@echo "Stop it with: make stop"

## the container engine's API (podman) and the container desktops' image (built once)
engine:
	@deploy/dev.sh engine

desktop-image: install
	@deploy/dev.sh desktop-image

## test: install what is missing, start services if needed, run every test, in two processes (the
## tests that start the machine's shared services all in one); TEST_PROCESSES=1 runs one
TEST_PROCESSES ?= 2
test: install services desktop-image
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy
	@$(VENV)/bin/pytest $(if $(filter-out 1,$(TEST_PROCESSES)),-n $(TEST_PROCESSES) --dist loadgroup)

## bench: run the benchmarks (ONLY="claim step": those alone), print a table, write bench-results.json
bench: install services desktop-image
	@$(PY) -m tests.bench $(ONLY)

## bench-gpu: the trainer on a random-weight Qwen2.5-VL 7B and 3B (a tiny one on the CPU), writes bench-gpu-results.json
bench-gpu: install services
	@$(PY) -m tests.bench.gpu $(if $(ARCH),--arch $(ARCH))

lint: install
	@$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

stop:
	@deploy/dev.sh stop
