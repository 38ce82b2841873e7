# profiler — the two commands a newcomer needs:
#   make demo   install into .venv, build the bundled workload, record it, report it, write a flame graph
#   make test   install into .venv and run the whole test suite (and `make lint`)
# and for the edit-test loop:
#   make check  unit tests without the slow ones, ruff and mypy: no privileges, no system packages
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
PROFILER := $(VENV)/bin/profiler
OUT    ?= out
STAMP  := $(VENV)/.installed

# `make fuzz`: a long structure-aware fuzzing campaign of the capture reader (random seed;
# COUNT mutations; failures saved under out/fuzz-failures). The suite runs a short fixed-seed one.
COUNT ?= 20000

.PHONY: fuzz demo test check venv fixtures browser-deps debuginfod-deps lint typecheck bench bench-decode bench-record bench-report bench-flamegraph bench-symtab bench-names bench-demangle bench-srcline bench-dwarf bench-export go-deps proto bench-stat bench-lost bench-debuginfod bench-scale bench-diff bench-flight bench-offcpu bench-view bench-containers bench-python clean

venv: $(STAMP)

# The editable install is setuptools' compat mode: a plain path in a .pth file. The default
# mode installs an import hook that every interpreter start imports (with pathlib, fnmatch and
# importlib.util): ~13 ms of CPU on each `profiler` command. Should a setuptools release drop
# compat mode, the default mode is used. The stamp depends on this Makefile, so a change to
# how the venv is made re-installs existing ones. The install builds the optional compiled kernel
# (setup.py) in place, next to its source: an edit of compiled.c re-installs.
$(STAMP): pyproject.toml Makefile setup.py profiler/native/compiled.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[test]' --config-settings editable_mode=compat \
	  || $(PIP) install --quiet -e '.[test]'
	@touch $(STAMP)

fixtures:
	@$(MAKE) --no-print-directory -C fixtures OUT=$(CURDIR)/$(OUT)/fixtures

# Headless Chromium for the flame graph browser tests (Debian package; Playwright drives it).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package) for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# A real debuginfod server for the debuginfod client's tests (Debian package, from elfutils).
debuginfod-deps:
	@command -v debuginfod >/dev/null 2>&1 || { \
	  echo "installing debuginfod (Debian package) for the debuginfod tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  for try in 1 2 3 4 5 6 7 8 9 10; do \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq debuginfod >/dev/null \
	      && break; echo "apt-get is busy (try $$try), retrying"; sleep 6; done; \
	  command -v debuginfod >/dev/null; }

# Go's pprof for the pprof export tests (`go tool pprof`; Debian package golang-go).
go-deps:
	@command -v go >/dev/null 2>&1 || { \
	  echo "installing golang-go (Debian package) for the pprof tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  for try in 1 2 3 4 5 6 7 8 9 10; do \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq golang-go >/dev/null \
	      && break; echo "apt-get is busy (try $$try), retrying"; sleep 6; done; \
	  command -v go >/dev/null; }

# Regenerates the committed profiler/report/render/proto/profile_pb2.py from profile.proto
# (protoc from PyPI's grpcio-tools in a throw-away virtualenv; not needed to build or test).
proto:
	tools/gen_proto.sh

demo: venv fixtures
	@mkdir -p $(OUT)
	$(PROFILER) record -g -o $(OUT)/demo.prof -- $(OUT)/fixtures/workloads/shares
	$(PROFILER) report -i $(OUT)/demo.prof --no-children -g none
	$(PROFILER) report -i $(OUT)/demo.prof -g caller --percent-limit 5
	$(PROFILER) flamegraph -i $(OUT)/demo.prof -o $(OUT)/demo-flamegraph.html
	@echo
	@echo "flame graph: $(CURDIR)/$(OUT)/demo-flamegraph.html (open it in any browser, offline)"

test: venv browser-deps debuginfod-deps go-deps lint
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The unit tests minus those marked slow (fuzzing, property tests, worker processes; `make test`
# runs them), then ruff and mypy. Needs neither perf events nor Debian packages: only the venv
# (and gcc and make, which build the fixture binaries).
check: venv
	$(PY) -m pytest -q -m "not slow" tests/unit $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory lint

# ruff (its rules are in pyproject.toml) and mypy --strict on the package.
lint: venv
	$(PY) -m ruff check .
	$(PY) -m mypy profiler

fuzz: venv
	$(PY) tests/fuzz/capture_fuzz.py --count $(COUNT)

typecheck: venv
	$(PY) -m mypy profiler

bench: bench-lost bench-decode bench-record bench-report bench-scale bench-flamegraph bench-symtab bench-archive bench-names bench-demangle bench-srcline bench-dwarf bench-export bench-stat bench-debuginfod bench-diff bench-offcpu bench-flight bench-view bench-containers bench-python

bench-lost: venv fixtures
	$(PY) benchmarks/bench_lost.py

bench-decode: venv
	$(PY) benchmarks/bench_decode.py

bench-record: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_record.py

bench-python: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_python.py

bench-containers: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_containers.py

bench-flight: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_flight.py

bench-offcpu: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_offcpu.py

# record --python-lines: the reader's cost to the recorder (docs/python-lines.md)
.PHONY: bench-pylines
bench: bench-pylines
bench-pylines: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_pylines.py

# start-up of the everyday commands: import time (ours, numpy, click, the rest) and wall time;
# CAPTURE=path reports on that capture instead of recording one (issue #28, item 5)
.PHONY: bench-startup
bench: bench-startup
bench-startup: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_startup.py $(if $(CAPTURE),--capture $(CAPTURE))

bench-diff: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_diff.py

bench-report: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_report.py

bench-scale: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_scale.py

bench-flamegraph: venv
	$(PY) benchmarks/bench_flamegraph.py

bench-symtab: venv
	$(PY) benchmarks/bench_symtab.py

bench-names: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_names.py

bench-srcline: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_srcline.py

bench-debuginfod: venv fixtures debuginfod-deps
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_debuginfod.py --fixtures $(OUT)/fixtures

bench-demangle: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_demangle.py

bench-dwarf: venv fixtures
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_dwarf.py

# profiler view on a 1M-sample, 64-thread capture: file size (and the Firefox Profiler and
# speedscope exports' for comparison), first paint, range re-render and memory in headless Chromium.
bench-view: venv browser-deps
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_view.py

bench-export: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_export.py

bench-stat: venv
	env -u PYTHONDONTWRITEBYTECODE $(PY) benchmarks/bench_stat.py

bench-archive: venv fixtures
	$(PY) benchmarks/bench_archive.py

clean:
	rm -rf $(VENV) $(OUT) fixtures/build .pytest_cache .mypy_cache build profiler/native/*.so
