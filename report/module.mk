# report/module.mk — build/gpumem-report, the offline analyzer:
#   report/reader (bytes -> lines -> validated records) -> report/analyses (one streaming pass ->
#   ProcessReport; report/allocator_model: PyTorch's caching allocator, replayed by what_if)
#   -> report/outputs (text, JSON, HTML, Perfetto, folded) -> report/cli (options, CI gates) -> main.cpp.
# Every .cpp under those four folders goes into a static library shared by the program, the
# unit tests, the fuzzer and the benchmark.

# report/import (PyTorch snapshot -> trace) too: only its .cpp files; its .cc files are programs
# (gpumem-snapshot2trace, the pickle fuzzer) built by tools/module.mk.
# trace/json_line.cpp: the JSON line builder the snapshot converter writes with (as the recorder does).
# trace/dwarf_symbols.cpp: the recorder's DWARF lookup, for traces recorded without symbols
# (report/reader/offline_symbolizer.cpp; elfutils: -ldw -lelf).
REPORT_SRCS := $(sort $(shell find report/reader report/allocator_model report/analyses report/outputs report/cli report/import -name '*.cpp')) \
  trace/json_line.cpp trace/dwarf_symbols.cpp
# The HTML report's scripts and styles (report/outputs/html_output.cpp), inlined at build time: the
# chart libraries from npm (vendor/package-lock.json pins them; `make deps` installs them under
# vendor/node_modules) and the report's own app. Order matters: d3's modules before d3-flame-graph.
HTML_VENDOR_FILES := $(addprefix vendor/node_modules/, \
  uplot/dist/uPlot.iife.min.js uplot/dist/uPlot.min.css \
  internmap/dist/internmap.min.js d3-array/dist/d3-array.min.js d3-dispatch/dist/d3-dispatch.min.js \
  d3-selection/dist/d3-selection.min.js d3-format/dist/d3-format.min.js d3-hierarchy/dist/d3-hierarchy.min.js \
  d3-color/dist/d3-color.min.js d3-interpolate/dist/d3-interpolate.min.js d3-time/dist/d3-time.min.js \
  d3-time-format/dist/d3-time-format.min.js d3-scale/dist/d3-scale.min.js d3-ease/dist/d3-ease.min.js \
  d3-timer/dist/d3-timer.min.js d3-transition/dist/d3-transition.min.js \
  d3-flame-graph/dist/d3-flamegraph.umd.min.js)
# The report's own views (each file adds to window.GpuMem) come before app.js, which draws the page.
HTML_VIEW_FILES := $(addprefix report/outputs/html/, timeline_data.js stacks.js axis.js tables.js allocations_view.js \
  segment_view.js history_view.js sections.js sites_view.js tests_view.js views.css)
HTML_ASSET_FILES := $(HTML_VENDOR_FILES) $(HTML_VIEW_FILES) report/outputs/html/app.js report/outputs/html/app.css
HTML_ASSETS_SRC := $(BUILD)/report/outputs/html_assets.cpp

$(HTML_VENDOR_FILES): vendor/package-lock.json | deps-check
	@test -f $@ || { echo "$@ is missing: run make deps (npm ci in vendor/)"; exit 2; }
$(HTML_ASSETS_SRC): report/outputs/html/embed_assets.py $(HTML_ASSET_FILES)
	$(PYTHON) $< $@ $(HTML_ASSET_FILES)
$(BUILD)/report/outputs/html_assets.o: $(HTML_ASSETS_SRC) | deps-check
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -c $< -o $@

REPORT_OBJS := $(REPORT_SRCS:%.cpp=$(BUILD)/%.o) $(BUILD)/report/outputs/html_assets.o

# The shipped library rules (report/analyses/library_rules.supp) are compiled in: a C++ raw string
# generated from the readable file, so the installed analyzer needs no data file.
LIBRARY_RULES_INC := $(BUILD)/gen/report/analyses/library_rules.inc
$(LIBRARY_RULES_INC): report/analyses/library_rules.supp
	@mkdir -p $(@D)
	{ printf 'R"GPUMEMTRACE_SUPP('; cat $<; printf ')GPUMEMTRACE_SUPP"\n'; } > $@
$(BUILD)/report/analyses/suppressions.o: $(LIBRARY_RULES_INC)
$(BUILD)/report/analyses/suppressions.o: CPPFLAGS += -I$(BUILD)/gen
REPORT_LIB := $(BUILD)/report/libgpumem-report.a
REPORT_LDLIBS := -lsimdjson -lzstd -ldw -lelf

$(REPORT_LIB): $(REPORT_OBJS)
	@mkdir -p $(@D)
	@rm -f $@  # ar only adds members: start over so removed sources leave no stale objects
	$(AR) rcs $@ $^

# --version prints the project's version (GPUMEMTRACE_VERSION, interpose/module.mk).
$(BUILD)/report/main.o: CPPFLAGS += -DGPUMEMTRACE_VERSION='"$(GPUMEMTRACE_VERSION)"'
$(BUILD)/gpumem-report: $(BUILD)/report/main.o $(REPORT_LIB)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(REPORT_LDLIBS)

PROGRAMS += $(BUILD)/gpumem-report

# --- unit tests (GoogleTest): tests/unit/report_*.cpp -> one binary ---
REPORT_UNIT_SRCS := $(sort $(wildcard tests/unit/report_*.cpp))
REPORT_UNIT_BIN := $(BUILD)/tests/unit/report_unit_tests
$(REPORT_UNIT_BIN): $(REPORT_UNIT_SRCS:%.cpp=$(BUILD)/%.o) $(REPORT_LIB)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(REPORT_LDLIBS) -lgtest -lgtest_main -lpthread
ifneq ($(REPORT_UNIT_SRCS),)
UNIT_TESTS += $(REPORT_UNIT_BIN)
endif

# --- libFuzzer targets for the reader and the analyses (clang): report/fuzz/module.mk ---
include report/fuzz/module.mk
