# tools/module.mk — see the top-level Makefile. The launcher (build/gpumemtrace) and the PyTorch
# snapshot import (report/import/: restricted pickle reader, snapshot -> trace converter, its CLI,
# unit tests and fuzz target).

# ---- PyTorch snapshot import ----
# SNAPSHOT_IMPORT_OBJS: link these into a program that reads snapshots (gpumem-report has them in
# libgpumem-report.a instead). Every .cpp of report/import/, and the JSON line builder it writes with.
SNAPSHOT_IMPORT_SRCS := $(sort $(wildcard report/import/*.cpp)) trace/json_line.cpp
SNAPSHOT_IMPORT_OBJS := $(SNAPSHOT_IMPORT_SRCS:%.cpp=$(BUILD)/%.o)

PROGRAMS += $(BUILD)/gpumem-snapshot2trace

# The CLI's main and the fuzz target are .cc files on purpose: report/module.mk puts every .cpp under
# report/{reader,analyses,outputs,cli,import} into libgpumem-report.a and its fuzzer, and a second
# main() or LLVMFuzzerTestOneInput there would break them.
$(BUILD)/report/import/%.o: report/import/%.cc
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -c $< -o $@

$(BUILD)/gpumem-snapshot2trace: $(BUILD)/report/import/snapshot2trace_main.o $(SNAPSHOT_IMPORT_OBJS)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@

# Unit tests (GoogleTest).
SNAPSHOT_UNIT_TEST := $(BUILD)/tests/unit/snapshot_test
UNIT_TESTS += $(SNAPSHOT_UNIT_TEST)

$(SNAPSHOT_UNIT_TEST): $(BUILD)/tests/unit/snapshot_pickle_test.o $(BUILD)/tests/unit/snapshot_convert_test.o \
                       $(SNAPSHOT_IMPORT_OBJS)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ -lgtest -lgtest_main -pthread

# libFuzzer target (clang): tests/snapshot/test_snapshot_fuzz.py runs it briefly in `make test`,
# `make fuzz` at length (FUZZ_SECONDS, default 300).
SNAPSHOT_FUZZER := $(BUILD)/fuzz/snapshot_pickle_fuzzer
SNAPSHOT_FUZZ_SRCS := report/import/pickle_fuzzer.cc $(SNAPSHOT_IMPORT_SRCS)
TEST_BINS += $(SNAPSHOT_FUZZER) $(BUILD)/gpumem-snapshot2trace
FUZZ_TARGETS += fuzz-snapshot-pickle

$(SNAPSHOT_FUZZER): $(SNAPSHOT_FUZZ_SRCS) report/import/pickle_reader.h report/import/snapshot_to_trace.h
	@mkdir -p $(@D)
	$(CLANGXX) -std=c++17 -g -O1 -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  $(SNAPSHOT_FUZZ_SRCS) -o $@

fuzz-snapshot-pickle: $(SNAPSHOT_FUZZER)
	@mkdir -p $(BUILD)/fuzz/snapshot-corpus
	$(PYTHON) tests/snapshot/snapshot_samples.py --corpus $(BUILD)/fuzz/snapshot-corpus
	$(SNAPSHOT_FUZZER) -max_total_time=$(or $(FUZZ_SECONDS),300) -max_len=65536 -timeout=10 \
	  -rss_limit_mb=2048 $(BUILD)/fuzz/snapshot-corpus
.PHONY: fuzz-snapshot-pickle

# ---- the launcher ----
PROGRAMS += $(BUILD)/gpumemtrace

# It checks the report options it passes on with gpumem-report's own definition (report/cli/options.cpp,
# from the report library), before it starts the program.
$(BUILD)/tools/gpumemtrace.o: CPPFLAGS += -DGPUMEMTRACE_VERSION='"$(GPUMEMTRACE_VERSION)"'
# `gpumemtrace top` (tools/top.cpp) reads traces with the report library too. LAUNCHER_OBJS: the
# release bundle links the same objects (packaging/module.mk).
LAUNCHER_OBJS := $(BUILD)/tools/gpumemtrace.o $(BUILD)/tools/top.o $(BUILD)/tools/traced_process.o $(BUILD)/tools/dump.o
$(BUILD)/gpumemtrace: $(LAUNCHER_OBJS) $(REPORT_LIB)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(REPORT_LDLIBS)
