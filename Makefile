# Every target sets itself up from nothing: a fresh clone needs only python3 (>= 3.11) and git.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# what the install depends on in pyproject.toml: all of it but the test tools' settings
# (pytest's markers, ruff's and mypy's rules), whose change needs no new install
DEPS_ID := $(shell awk '/^\[/ { skip = /^\[+tool\.(ruff|mypy|pytest)/ } !skip' pyproject.toml \
	| cksum | cut -d' ' -f1)
STAMP  := $(VENV)/.installed-$(DEPS_ID)
# The released agent CLIs the tests drive (tests/agents/test_real_agents.py); a bump is one line.
CLAUDE_CODE_VERSION := 2.1.197
CODEX_VERSION       := 0.169.0
GEMINI_CLI_VERSION  := 0.61.0
HARBOR_VERSION      := 0.25.0
AGENTS_DIR   := .agents
AGENTS_STAMP := $(AGENTS_DIR)/.installed-$(CLAUDE_CODE_VERSION)-$(CODEX_VERSION)-$(GEMINI_CLI_VERSION)
UNCONFINED_TESTS := tests/sandbox/test_sandbox.py tests/step/test_run.py tests/step/test_pty.py \
	tests/step/test_supervisor.py tests/git/test_guard.py tests/agents/test_fake_agent.py tests/changes/test_recovery.py \
	tests/history/test_checkpoints.py
# bar ui's browser libraries (ui/package.json, pinned): only their dist files and licences
# are copied into the package, where `bar ui` serves them (never from a CDN)
UI_VENDOR := src/bar/ui/static/vendor
UI_STAMP  := $(UI_VENDOR)/.installed

.PHONY: install agents shells browser ui-assets test test-fast test-long lint typecheck unit demo demo-workers bench bench-full clean

$(STAMP): setup.py src/bar/sandbox/exec_quick.c src/bar/cli/launcher.c bin/bar | $(UI_STAMP)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "bar needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,workers,otel]'
	@# ATIF's reference models (the Harbor project's, docs/sharing.md), for the tests only:
	@# Harbor asks for Python 3.12 and a framework's worth of packages, yet its ATIF
	@# models and validator need only pydantic, which bar's mcp brings
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --ignore-requires-python \
		harbor==$(HARBOR_VERSION)
	@# bar needs no setuptools where it runs (it is built in an isolated environment); the
	@# copy venv puts there loads a .pth hook at every start of every bar command (~1 ms)
	$(PY) -m pip uninstall --quiet --disable-pip-version-check -y setuptools
	@# bar starts on every agent step: never make it compile its modules at run time
	$(PY) -m compileall -q src/bar
	@# the compiled bar in place of the script (optional: without a C compiler bar stays
	@# the script): Python's start saved on every served command and every agent's hook
	$(PY) -m bar.cli.launcher
	@rm -f $(VENV)/.installed-*
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

# Without npm, outside CI, `bar ui` serves plain-text diffs and outputs and says so.
$(UI_STAMP): ui/package.json ui/package-lock.json
	@if ! command -v npm >/dev/null; then \
		if [ -n "$$CI" ]; then echo "npm is needed for bar ui's browser libraries" >&2; exit 1; fi; \
		echo "npm not found: bar ui will show plain-text diffs (make ui-assets later)"; exit 0; \
	fi; \
	npm ci --prefix ui --no-audit --no-fund --ignore-scripts --loglevel=error && \
	rm -rf $(UI_VENDOR) && mkdir -p $(UI_VENDOR)/licenses && \
	m=ui/node_modules && \
	cp $$m/diff2html/bundles/js/diff2html-ui-slim.min.js $$m/diff2html/bundles/css/diff2html.min.css \
		$$m/highlight.js/styles/github.min.css \
		$$m/asciinema-player/dist/bundle/asciinema-player.min.js \
		$$m/asciinema-player/dist/bundle/asciinema-player.css \
		$$m/ansi_up/ansi_up.js $(UI_VENDOR)/ && \
	cp $$m/diff2html/LICENSE.md $(UI_VENDOR)/licenses/diff2html.LICENSE.md && \
	cp $$m/highlight.js/LICENSE $(UI_VENDOR)/licenses/highlight.js.LICENSE && \
	cp $$m/asciinema-player/LICENSE $(UI_VENDOR)/licenses/asciinema-player.LICENSE && \
	cp $$m/ansi_up/LICENSE $(UI_VENDOR)/licenses/ansi_up.LICENSE && \
	touch $@

ui-assets: $(UI_STAMP)

# zsh and fish for the completion tests (tests/cli/test_completion_shells.py). CI installs
# them with apt; elsewhere, without them, those tests are skipped.
shells:
	@if [ -n "$$CI" ] && ! { command -v zsh && command -v fish; } >/dev/null; then \
		if ! command -v apt-get >/dev/null; then echo "zsh and fish are needed" >&2; exit 1; fi; \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get install -y -qq zsh fish >/dev/null 2>&1 || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y -qq zsh fish >/dev/null; }; \
	fi

# Debian's chromium for bar ui's browser tests (tests/ui/test_browser.py): Playwright drives
# it at /usr/bin/chromium. CI installs it with apt; elsewhere, without it, they are skipped.
browser:
	@if [ -n "$$CI" ] && [ ! -x /usr/bin/chromium ]; then \
		if ! command -v apt-get >/dev/null; then echo "chromium is needed" >&2; exit 1; fi; \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get install -y -qq chromium >/dev/null 2>&1 || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium >/dev/null; }; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench demo
	$(VENV)/bin/ruff format --check src tests bench demo

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# SIGKILL sweeps crash a command at each of its write points: make test visits a seeded
# 20% of each sweep's points (and draws 20% of the longest property test's examples; a
# new seed each day: pytest's summary names it), test-long every point and every example,
# and 500 random SIGKILL trials besides (the sweeps, -m slow, on two cores: 128 CPU-s at
# 20%, 159 at 25%)
SWEEP_SHARE ?= 0.2

# two test processes a core: most tests wait on git, agents, servers and their children,
# so twice the cores keeps the cores busy (a whole run: 1,000 s with one a core, 860 s with
# two, on 2 cores); an idle process takes work from a busy one's queue (worksteal)
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist worksteal

# where the tests' temporary folders go (pytest's: each test's repositories, worktrees and
# bar home): a tmpfs at /dev/shm with 4 GiB free where the machine has one (the many
# small files git makes and bar's tests delete cost a disk file system's allocator: the
# modules that make many repositories and steps took ~12% less time and CPU there, the
# whole suite ~5%), else the system's temporary folder.
# TEST_TMP=disk keeps them on disk; test-long always does, so that the long trials
# meet a disk file system. A passed test's folder is removed when it ends (a failed
# one's is kept: pytest's summary names it), so a run holds little memory.
TEST_TMP ?= auto
TEMPROOT := $(shell [ "$(TEST_TMP)" != disk ] && [ -d /dev/shm ] && [ -w /dev/shm ] \
	&& [ "$$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
	&& [ $$(( $$(stat -f -c '%a * %S' /dev/shm) >> 30 )) -ge 4 ] && echo /dev/shm)
unit test-fast: export PYTEST_DEBUG_TEMPROOT := $(TEMPROOT)
PYTEST_TMP := -o tmp_path_retention_policy=failed

# pytest keeps the test modules it rewrote (their asserts) as bytecode beside them; a
# PYTHONDONTWRITEBYTECODE in the environment would have every test process rewrite all of
# them again at its start (~7 s of CPU each)
unit test-fast test-long: export PYTHONDONTWRITEBYTECODE :=

unit: $(STAMP) agents shells browser
	TEST_SWEEP_SHARE=$(SWEEP_SHARE) $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_TMP) --durations=15
	@# again where the kernel cannot confine a step (simulated): bar must say so and go on
	@# (the tests of seconds, marked long, run so in test-long)
	BAR_SANDBOX_UNAVAILABLE=1 $(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_TMP) -p no:randomly \
		-m "not slow and not long" $(UNCONFINED_TESTS)

# for work in progress: the suite without the long sweeps (marked slow) and the tests that
# take seconds each (marked long: tests/data/long_tests.txt); make test runs them all
test-fast: $(STAMP)
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_TMP) -m "not slow and not long"

test-long: $(STAMP) agents shells browser
	TEST_SWEEP_SHARE=1 $(PY) -m pytest $(PYTEST_PARALLEL) -m slow
	BAR_SANDBOX_UNAVAILABLE=1 $(PY) -m pytest $(PYTEST_PARALLEL) -p no:randomly -m "long and not slow" \
		$(UNCONFINED_TESTS)
	$(PY) bench/crash_trials.py --trials 500 --new-ops --seed $$(date +%Y%m%d)
	@# the oracle with an editor autosaving through rollbacks (a race: not in make test)
	BAR_ORACLE_RACES=1 BAR_ORACLE_EXAMPLES=40 BAR_ORACLE_ACTIONS=12 $(PY) -m pytest -p no:randomly \
		tests/test_oracle.py -k snapshots_equal
	$(PY) bench/run.py --quick --sizes small --repeat 1

# the type check and the quick benchmark (a smoke test: it fails only when a command
# fails, never on timing, so one round of each figure is enough) run beside the suite,
# in the part of the cores its test processes leave idle while they wait on git, agents
# and servers; what they said comes after the suite's summary (tests/support/beside.py).
# With them, two cores are busy to the run's last seconds (vmstat: 99% on average), so
# each CPU-second beside costs about half a second of the run: the smoke takes a quarter
# of the figures, drawn anew each day as the sweeps are (25 CPU-s, not 101); test-long
# runs them all
test: lint $(STAMP) agents shells browser
	$(PY) tests/support/beside.py --log-dir .test-beside \
		--beside typecheck="$(VENV)/bin/mypy" \
		--beside bench="$(PY) bench/run.py --quick --sizes small --repeat 1 --pick 0.25" \
		-- $(MAKE) --no-print-directory unit

demo: $(STAMP)
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/demo.sh

# a Temporal dev server and two workers (two BAR_HOMEs and clones) on this machine
demo-workers: $(STAMP)
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/workers.sh

bench: $(STAMP)
	$(PY) bench/run.py --quick --sizes small

bench-full: $(STAMP)
	$(PY) bench/run.py --sizes small,medium

clean:
	rm -rf .test-beside $(VENV) $(AGENTS_DIR) ui/node_modules $(UI_VENDOR) build *.egg-info src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
