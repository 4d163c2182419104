# hpcprobe: `make run` measures this node, `make test` runs the test suite; both set up first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.hpcprobe-installed
# WHEELHOUSE=DIR: install from the wheels in DIR alone (a node without network; `make wheelhouse`
# fills DIR on one with it). VENV_FLAGS: passed to `python -m venv` (--system-site-packages).
WHEELHOUSE ?=
VENV_FLAGS ?=
PIP_SOURCE := $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)))
SOURCES := pyproject.toml CMakeLists.txt $(shell find src native -type f -not -name '*.pyc')

.PHONY: setup system-deps wheelhouse pyz run test bench lint clean

setup: system-deps $(STAMP)

# Debian packages (hwloc, likwid, Open MPI, hpcc) when root; the core works without them.
system-deps:
	@scripts/install-system-deps.sh

# With --system-site-packages, a PYTHON that is itself a venv (a PyTorch image's, say) lends
# its packages too, through a .pth: venv reuses only the base installation's.
PURELIB := import sysconfig; print(sysconfig.get_path('purelib'))
$(PY):
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(if $(findstring --system-site-packages,$(VENV_FLAGS)),$(PYTHON) -c \
	    "import sys; sys.prefix == sys.base_prefix or exec(\"$(PURELIB)\")" \
	    >"$$($(PY) -c "$(PURELIB)")/node-python.pth")
	$(if $(WHEELHOUSE),,$(PY) -m pip install -q --upgrade pip)

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install -q $(PIP_SOURCE) ".[test]"
	@touch $@

# WHEEL_PYTHON=3.12 WHEEL_GLIBC=2.28: for a node whose Python or glibc differ from this one's
wheelhouse:
	PYTHON=$(PYTHON) scripts/wheelhouse.sh $(or $(WHEELHOUSE),wheelhouse) $(WHEEL_PYTHON) $(WHEEL_GLIBC)

# the node image's check in one file (docs/check.md): PYZ=DIR, default dist/hpcprobe
pyz: setup
	$(PY) scripts/pyz.py $(or $(PYZ),dist/hpcprobe)

run: setup
	$(VENV)/bin/hpcprobe run $(ARGS)

# the ten slowest tests close each pass's report: the suite's time is kept in check by them.
# Two passes (scripts/test-suite.sh): the tests marked `alone` run after the rest, by themselves.
PYTEST_ARGS ?= --durations=10
test: setup
	scripts/test-suite.sh $(PY) $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/memory_vs_likwid.py
	$(PY) benchmarks/latency_levels.py
	$(PY) benchmarks/compute_vs_likwid.py
	$(PY) benchmarks/mpi_vs_hpcc.py
	$(PY) benchmarks/hpl_vs_hpcc.py
	$(PY) benchmarks/proxy_bounds.py
	$(PY) benchmarks/iperf3_by_hand.py
	$(PY) benchmarks/gpu_vs_torch.py

lint: setup
	$(PY) -m pip install -q ruff mypy
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build dist
