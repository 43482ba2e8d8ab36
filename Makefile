# plait: `make test` and `make demo` each set up what they need in .venv.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.plait-installed
SOURCES := pyproject.toml setup.py $(shell find plait -name '*.pyx' -o -name '*.pxd' 2>/dev/null)

.PHONY: test demo install clean gpu-test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install --quiet -e '.[test,peers]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q tests

gpu-test: $(STAMP)
	$(PY) -m pytest -q -m gpu tests

demo: $(STAMP)
	$(PY) -m plait

clean:
	rm -rf build $(VENV) *.egg-info
	find plait -name '*.so' -delete
	find plait -name '*.c' -path '*_kernels_cpu*' -delete
