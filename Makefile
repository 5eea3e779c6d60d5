# The two commands of the README: `make run` and `make test`.
# The first call creates .venv and installs the project from constraints.txt;
# later calls reuse it (reinstalling only when pyproject.toml or constraints.txt change).

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

export PREFECT_SERVER_ANALYTICS_ENABLED ?= false

# Tests run on every core (pytest-xdist), a slow module's tests on one worker (tests/conftest.py);
# `make test-fast` runs the unit tests alone (tests/unit).
JOBS ?= auto

# The unit tests on Python 3.13 as well (pyenv's, else python3.13 on the PATH), in a virtual environment of their own,
# without the deep extra (no PyTorch build for 3.13 lies on these machines' disks): the tests that need it skip.
PYTHON313 ?= $(firstword $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.13*/bin/python3.13) python3.13)
VENV313   := .venv-3.13

.PHONY: run test test-fast test-py313 docs benchmark lock clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[pipeline,team,test,docs,deep]'
	@touch $@

run: $(STAMP)
	$(BIN)/pll run

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -m "not slow"

$(VENV313)/.installed: pyproject.toml constraints.txt
	@test -x $(VENV313)/bin/python || $(PYTHON313) -m venv $(VENV313)
	$(VENV313)/bin/python -m pip install --quiet -c constraints.txt -e '.[pipeline,team,test,docs]'
	@touch $@

test-py313: $(VENV313)/.installed
	$(VENV313)/bin/python -m pytest -n $(JOBS) tests/unit

# The documentation site into site/, every warning an error (tests/unit/test_docs.py builds it too).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

benchmark: $(STAMP)
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

# Refresh constraints.txt from the current environment (after changing dependencies).
lock: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' > constraints.txt

clean:
	rm -rf $(VENV) $(VENV313) mlruns mlartifacts mlflow.db .pytest_cache
