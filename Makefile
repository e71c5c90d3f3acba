# `make demo` and `make test` both set up .venv from pyproject.toml first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The stamp names the Python that made .venv, so that another PYTHON makes it again (venv on
# top of another Python's .venv kept its old python)...
PYTHON_ID := $(shell $(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' \
	2>/dev/null)
STAMP := $(VENV)/.installed-python$(PYTHON_ID)
# ... and a .venv whose python no longer starts (its interpreter upgraded or removed) is made
# again too
ifneq ($(shell $(BIN)/python -c 'print(1)' 2>/dev/null),1)
.PHONY: $(STAMP)
endif

export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: demo test test-oldest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[fast,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/super-serial demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# The suite on the oldest Python, TensorFlow, NumPy, PyYAML and google-crc32c that
# pyproject.toml admits, in .venv-oldest (by hand: CI runs `make test`)
OLDEST_PYTHON ?= python3.9
OLDEST := .venv-oldest
test-oldest:
	$(OLDEST_PYTHON) -m venv --clear $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST)/bin/python -m pip install --quiet 'tensorflow==2.18.0' 'numpy==1.26.4' \
		'pyyaml==5.4.1' 'google-crc32c==1.5.0' 'pytest>=7' 'hypothesis>=6.80'
	$(OLDEST)/bin/python -m pip install --quiet --no-deps -e .
	$(OLDEST)/bin/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf $(VENV) $(OLDEST) .pytest_cache .hypothesis *.egg-info
