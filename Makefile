# Makefile — gpumemtrace's top-level build. `make help` lists the targets.
#
# Each folder contributes a fragment (<folder>/module.mk) that appends to the variables below, so
# the pipeline's pieces build independently: interpose/ (hooks, recorder, writer) -> trace/ (format)
# -> report/ (reader, analyses, outputs); cupti/, tools/, tests/, bench/ alongside. util/ holds the small
# helpers they share (clock, byte sizes, suffixes): header-only, so it has no fragment of its own.

CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build
CXX       ?= g++
CC        ?= gcc
CLANGXX   ?= clang++
PYTHON    ?= python3

OPT       ?= -O2
CXXFLAGS  ?= $(OPT) -g
CFLAGS    ?= $(OPT) -g
WARN      := -Wall -Wextra -Wno-unused-parameter
CPPFLAGS  += -I. -Iinclude -isystem $(CUDA_HOME)/include -MMD -MP
ALL_CXXFLAGS = -std=c++17 -fPIC $(WARN) $(CXXFLAGS)
ALL_CFLAGS   = -std=c11 -fPIC $(WARN) $(CFLAGS)

# Debian packages the build and the tests need; `make deps` installs the missing ones.
DEB_PACKAGES := build-essential clang libunwind-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev \
                libdw-dev libelf-dev libzstd-dev libsimdjson-dev libcli11-dev zstd jq python3 python3-pytest heaptrack valgrind time \
                nodejs chromium elfutils tmux \
                m4 zlib1g-dev \
                libpython3.11-testsuite python3-pyflakes \
                jupyter-nbconvert jupyter-client python3-ipykernel python3-nbclient
# tmux: the terminal `gpumemtrace top` is tested in (tests/launcher/test_top.py).
# m4: elfutils' build (packaging/third_party.sh, make dist); zlib1g-dev: libz.a, linked into the bundle.
# libpython3.11-testsuite (CPython's Lib/test for Debian 12's python3), python3-pyflakes (ships its
# tests): the suites `make test-transparency` runs plain and traced.
# jupyter-nbconvert, jupyter-client, python3-ipykernel, python3-nbclient: the notebook test
# (tests/notebook: `jupyter nbconvert --execute` in a `gpumemtrace kernel install` kernel).
# npm packages (vendor/package.json, pinned by vendor/package-lock.json): the HTML report's chart
# libraries, inlined into gpumem-report at build time. `make deps` installs them under vendor/node_modules.
NPM_VENDOR_STAMP := vendor/node_modules/.package-lock.json
# DuckDB (tests/scale/duckdb/package.json, pinned by its package-lock.json): runs docs/scale.md's SQL
# in tests/scale/test_export_sql.py. `make deps` installs it under tests/scale/duckdb/node_modules.
NPM_DUCKDB_STAMP := tests/scale/duckdb/node_modules/.package-lock.json

.DEFAULT_GOAL := all

# Fragments append to these.
LIBS       :=   # shared libraries under $(BUILD)
PROGRAMS   :=   # executables under $(BUILD)
TEST_BINS  :=   # things `make test` needs built
UNIT_TESTS :=   # gtest binaries run by `make test`
CLEAN_EXTRA :=
BENCH_TARGETS := # phony targets run by `make bench`
FUZZ_TARGETS  := # phony targets run by `make fuzz`

include trace/module.mk interpose/module.mk cupti/module.mk report/module.mk tools/module.mk tests/module.mk \
        bench/module.mk examples/module.mk
-include tests/driver/module.mk tests/python/module.mk tests/gpu/module.mk tests/transparency/module.mk
# Installing: make dist, wheel, install, gpu-bundle, dist-test (tests/dist's programs first: it lists them).
include tests/dist/module.mk packaging/module.mk
# Last: its rules list what the fragments above build.
include tests/sanitize.mk

## all: build the library and the tools (build/libgpumemtrace.so, build/gpumem-report, build/gpumemtrace)
all: deps-check $(LIBS) $(PROGRAMS)

## deps: install the Debian packages the build needs (apt-get; only what is missing)
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$(echo $$missing | sed 's/^/ /')"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@test $(NPM_VENDOR_STAMP) -nt vendor/package-lock.json || \
	  { echo "make deps: npm ci in vendor/"; cd vendor && npm ci --no-audit --no-fund --loglevel=error; }
	@test $(NPM_DUCKDB_STAMP) -nt tests/scale/duckdb/package-lock.json || \
	  { echo "make deps: npm ci in tests/scale/duckdb/"; cd tests/scale/duckdb && npm ci --no-audit --no-fund --loglevel=error; }
	@test -f $(CUDA_HOME)/include/cuda_runtime_api.h || \
	  { echo "make deps: CUDA toolkit headers not found under CUDA_HOME=$(CUDA_HOME)"; exit 2; }

# Every build goes through deps once per make invocation (cheap when everything is installed).
deps-check: deps
.PHONY: deps deps-check all

## test: build everything and run every test (unit, end-to-end, golden, brief fuzzing)
test: all $(TEST_BINS) $(UNIT_TESTS)
	@$(PYTHON) tests/run_tests.py --build $(BUILD) $(UNIT_TESTS)

## check-docs: run the commands README.md and docs/*.md show, check their names, figures and links (tests/docs/check_docs.py)
check-docs: all $(TEST_BINS)
	@$(PYTHON) tests/docs/check_docs.py --build $(BUILD)

## bench: run every benchmark (figures for docs/performance.md)
bench: all
	@$(MAKE) --no-print-directory $(BENCH_TARGETS)

## fuzz: run the fuzzers at length (FUZZ_SECONDS, default 300 each)
fuzz: all
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS)
.PHONY: bench fuzz

## help: list the targets
help:
	@grep -h -E '^## ' $(MAKEFILE_LIST) | sed -e 's/^## /  /' -e 's|\$$(BUILD)|$(BUILD)|g'

## clean: remove the build folder
clean:
	rm -rf $(BUILD) $(CLEAN_EXTRA)
.PHONY: test check-docs help clean

# Order-only on deps-check: with -j, nothing compiles before the packages are installed.
$(BUILD)/%.o: %.cpp | deps-check
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c | deps-check
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
