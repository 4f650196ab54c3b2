# notewell: `make demo` and `make test` are the quick start (see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_HOME ?= $(CURDIR)/.demo-home

.PHONY: install demo test test-install lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: install
	NOTEWELL_HOME=$(DEMO_HOME) $(VENV)/bin/notewell demo

test: install
	$(VENV)/bin/ruff check
	$(PY) -m pytest

# Build the wheel and sdist, install them with pip and pipx (and uv when present) outside
# the checkout, and upgrade in place (tests/test_install.py), and drive `notewell mcp`
# with the MCP Inspector fetched by npx (tests/test_mcp_inspector.py): minutes, CI runs it.
test-install: install
	$(PY) -m pytest -m install

# The benchmarks' figures (pytest -m bench); the real-corpus quality runs: -m real_corpus.
bench: install
	$(PY) -m pytest -m bench -s

clean:
	rm -rf $(VENV) $(DEMO_HOME) build *.egg-info daemon/*.egg-info
