# Two commands do all the set-up on a fresh machine:
#   make run   - create .venv, install the app and its bundled models, start the window
#   make test  - the same set-up plus the test extras, then run the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# This torch/torchvision pair lies on local disk (x86_64, Python 3.11); installing it
# first keeps pip from resolving the project's torch range to a download from the index.
# (PyPI's torchvision does not import beside the torch==2.13.0 CPU file, and easyocr's
# CRAFT detector needs torchvision.) On aarch64: TORCH="torch==2.9.1 torchvision==0.24.1".
TORCH  ?= torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.installed

.PHONY: run test bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[models,test]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/decoding-explorer

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q tests --ignore=tests/bench

bench: $(STAMP)
	for b in tests/bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
