# report/fuzz/module.mk — the analyzer's libFuzzer targets (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer), included by report/module.mk:
#   fuzz_report_reader        any bytes as a trace: a TraceError or a report, never a crash or a hang;
#   fuzz_report_differential  a mutated real trace gives the report its canonical re-encoding gives,
#                             or exit 2 (report/fuzz/differential.h).
# Both are built from the analyzer's sources compiled once with the fuzzer's instrumentation (not
# the g++ library), so that clang instruments every line they fuzz. tests/report runs each briefly in
# `make test`; `make fuzz` runs them at length (FUZZ_SECONDS each, default 300).

FUZZ_OBJ_DIR := $(BUILD)/fuzz-obj
FUZZ_CXXFLAGS := -std=c++17 -O1 -g -I. -I$(BUILD)/gen -fsanitize=fuzzer-no-link,address,undefined \
  -fno-sanitize-recover=undefined
REPORT_FUZZ_OBJS := $(patsubst %.cpp,$(FUZZ_OBJ_DIR)/%.o,$(REPORT_SRCS) $(HTML_ASSETS_SRC))
$(FUZZ_OBJ_DIR)/%.o: %.cpp | $(LIBRARY_RULES_INC) deps-check
	@mkdir -p $(@D)
	$(CLANGXX) $(FUZZ_CXXFLAGS) -MMD -MP -c $< -o $@
FUZZ_LINK = $(CLANGXX) -fsanitize=fuzzer,address,undefined $^ -o $@ $(REPORT_LDLIBS)

REPORT_FUZZ_BIN := $(BUILD)/report/fuzz_report_reader
$(REPORT_FUZZ_BIN): $(FUZZ_OBJ_DIR)/report/fuzz/fuzz_reader.o $(REPORT_FUZZ_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_LINK)

REPORT_DIFF_FUZZ_BIN := $(BUILD)/report/fuzz_report_differential
$(REPORT_DIFF_FUZZ_BIN): $(FUZZ_OBJ_DIR)/report/fuzz/fuzz_differential.o $(FUZZ_OBJ_DIR)/report/fuzz/differential.o \
                         $(REPORT_FUZZ_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_LINK)
TEST_BINS += $(REPORT_FUZZ_BIN) $(REPORT_DIFF_FUZZ_BIN)

FUZZ_SECONDS ?= 300
report-fuzz: $(REPORT_FUZZ_BIN)
	@mkdir -p $(BUILD)/report/fuzz-corpus
	$(REPORT_FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	  $(BUILD)/report/fuzz-corpus tests/report/golden tests/report/malformed

# The seeds: small valid windows of the real traces and of traces the simulator records now
# (tests/report/fuzz_seeds.py); the corpus grows in $(BUILD)/report/differential-corpus.
report-fuzz-differential: $(REPORT_DIFF_FUZZ_BIN) all $(TEST_BINS)
	$(PYTHON) tests/report/fuzz_seeds.py --build $(BUILD) --out $(BUILD)/report/differential-seeds
	@mkdir -p $(BUILD)/report/differential-corpus
	$(REPORT_DIFF_FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	  -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix=$(BUILD)/report/differential- \
	  $(BUILD)/report/differential-corpus $(BUILD)/report/differential-seeds
FUZZ_TARGETS += report-fuzz report-fuzz-differential

.PHONY: report-fuzz report-fuzz-differential
