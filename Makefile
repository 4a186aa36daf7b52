# Every target sets itself up from nothing: a fresh clone needs only python3 (>= 3.11) and git.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# The released agent CLIs the tests drive (tests/test_agents_real.py); a bump is one line.
CLAUDE_CODE_VERSION := 2.1.197
CODEX_VERSION       := 0.169.0
GEMINI_CLI_VERSION  := 0.61.0
AGENTS_DIR   := .agents
AGENTS_STAMP := $(AGENTS_DIR)/.installed-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION)-$(GEMINI_CLI_VERSION)
UNCONFINED_TESTS := tests/test_sandbox.py tests/test_run.py tests/test_run_pty.py \
	tests/test_supervisor.py tests/test_guard.py tests/test_agents_fake.py tests/test_recovery.py \
	tests/test_checkpoints.py

.PHONY: install agents shells test lint typecheck unit demo bench bench-full clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "bar needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@# bar starts on every agent step: never make it compile its modules at run time
	$(PY) -m compileall -q src/bar
	@touch $(STAMP)

install: $(STAMP)

# npm's cache (~/.npm) makes a second install quick. Install scripts are not run but for
# Claude Code's, which puts its native binary in place. Without npm, outside CI, the
# real-agent tests are skipped.
$(AGENTS_STAMP):
	@if ! command -v npm >/dev/null; then \
		if [ -n "$$CI" ]; then echo "npm is needed to install the agent CLIs" >&2; exit 1; fi; \
		echo "npm not found: the tests with the real agent CLIs will be skipped"; exit 0; \
	fi; \
	rm -rf $(AGENTS_DIR) && mkdir -p $(AGENTS_DIR) && \
	npm install --prefix $(AGENTS_DIR) --no-save --no-audit --no-fund --ignore-scripts \
		--loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) \
		@openai/codex@$(CODEX_VERSION) \
		@google/gemini-cli@$(GEMINI_CLI_VERSION) && \
	(cd $(AGENTS_DIR)/node_modules/@anthropic-ai/claude-code && node install.cjs) && \
	touch $@

agents: $(AGENTS_STAMP)

# zsh and fish for the completion tests (tests/test_completion_shells.py). CI installs
# them with apt; elsewhere, without them, those tests are skipped.
shells:
	@if [ -n "$$CI" ] && ! { command -v zsh && command -v fish; } >/dev/null; then \
		if ! command -v apt-get >/dev/null; then echo "zsh and fish are needed" >&2; exit 1; fi; \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get install -y -qq zsh fish >/dev/null 2>&1 || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y -qq zsh fish >/dev/null; }; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench demo
	$(VENV)/bin/ruff format --check src tests bench demo

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) agents shells
	$(PY) -m pytest -n auto
	@# again where the kernel cannot confine a step (simulated): bar must say so and go on
	BAR_SANDBOX_UNAVAILABLE=1 $(PY) -m pytest -n auto -p no:randomly $(UNCONFINED_TESTS)

test: lint typecheck unit
	@# the quick benchmark as a smoke test: fails only when a command fails, never on timing
	$(PY) bench/run.py --quick --sizes small

demo: $(STAMP)
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/demo.sh

bench: $(STAMP)
	$(PY) bench/run.py --quick --sizes small

bench-full: $(STAMP)
	$(PY) bench/run.py --sizes small,medium

clean:
	rm -rf $(VENV) $(AGENTS_DIR) build *.egg-info src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
