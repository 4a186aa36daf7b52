# Every target sets itself up from nothing: a fresh clone needs only python3 (>= 3.11) and git.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
UNCONFINED_TESTS := tests/test_sandbox.py tests/test_run.py tests/test_run_pty.py \
	tests/test_supervisor.py tests/test_guard.py tests/test_agents_fake.py tests/test_recovery.py

.PHONY: install test lint typecheck unit demo bench bench-full clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "bar needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@# bar starts on every agent step: never make it compile its modules at run time
	$(PY) -m compileall -q src/bar
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench demo
	$(VENV)/bin/ruff format --check src tests bench demo

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest -n auto
	@# again where the kernel cannot confine a step (simulated): bar must say so and go on
	BAR_SANDBOX_UNAVAILABLE=1 $(PY) -m pytest -n auto -p no:randomly $(UNCONFINED_TESTS)

test: lint typecheck unit

demo: $(STAMP)
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/demo.sh

bench: $(STAMP)
	$(PY) bench/run.py --quick --sizes small

bench-full: $(STAMP)
	$(PY) bench/run.py --sizes small,medium

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
