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
# the checkout, and upgrade in place (tests/test_install.py; slow, CI runs it).
test-install: install
	$(PY) -m pytest -m slow tests/test_install.py

bench: install
	$(PY) -m pytest -m slow -s

clean:
	rm -rf $(VENV) $(DEMO_HOME) build *.egg-info daemon/*.egg-info
