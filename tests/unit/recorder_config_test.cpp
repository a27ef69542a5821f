// tests/unit/recorder_config_test.cpp — configuration parsing: defaults, valid values, and one
// warning plus the default for every bad value.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "interpose/recorder/config.h"

namespace gpumemtrace {
namespace {

std::map<std::string, std::string> g_env;
std::vector<std::string> g_warnings;

const char* fake_getenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
void collect_warning(const char* msg) { g_warnings.push_back(msg); }

Config parse(std::map<std::string, std::string> env) {
  g_env = std::move(env);
  g_warnings.clear();
  return parse_config(fake_getenv, collect_warning);
}

TEST(Config, Defaults) {
  Config c = parse({});
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.output, "gpumemtrace.%e.%p.jsonl.zst");
  EXPECT_EQ(c.stack_depth, 64);
  EXPECT_FALSE(c.free_stacks);
  EXPECT_EQ(c.on_full, OnFull::Wait);
  EXPECT_EQ(c.ring_events, 16384u);
  EXPECT_EQ(c.flush_ms, 100);
  EXPECT_TRUE(c.symbolize);
  EXPECT_EQ(c.unwind, UnwindMode::Auto);
  EXPECT_TRUE(c.intern_stacks);
  EXPECT_TRUE(g_warnings.empty());
}

TEST(Config, ValidValues) {
  Config c = parse({{"GPUMEMTRACE_DISABLE", "yes"},
                    {"GPUMEMTRACE_OUTPUT", "/tmp/x/"},
                    {"GPUMEMTRACE_STACK_DEPTH", "12"},
                    {"GPUMEMTRACE_ON_FULL", "DROP"},
                    {"GPUMEMTRACE_RING_EVENTS", "1024"},
                    {"GPUMEMTRACE_FLUSH_MS", "10"},
                    {"GPUMEMTRACE_SYMBOLIZE", "0"},
                    {"GPUMEMTRACE_FREE_STACKS", "on"},
                    {"GPUMEMTRACE_UNWIND", "DWARF"},
                    {"GPUMEMTRACE_INTERN_STACKS", "0"},
                    {"GPUMEMTRACE_PYTHON", "0"}});
  EXPECT_TRUE(c.disabled);
  EXPECT_EQ(c.output, "/tmp/x/");
  EXPECT_EQ(c.stack_depth, 12);
  EXPECT_EQ(c.on_full, OnFull::Drop);
  EXPECT_EQ(c.ring_events, 1024u);
  EXPECT_EQ(c.flush_ms, 10);
  EXPECT_FALSE(c.symbolize);
  EXPECT_TRUE(c.free_stacks);
  EXPECT_FALSE(c.python_frames);
  EXPECT_EQ(c.unwind, UnwindMode::Dwarf);
  EXPECT_FALSE(c.intern_stacks);
  EXPECT_EQ(parse({{"GPUMEMTRACE_UNWIND", "auto"}}).unwind, UnwindMode::Auto);
  EXPECT_TRUE(parse({{"GPUMEMTRACE_PYTHON", "auto"}}).python_frames);
  EXPECT_TRUE(g_warnings.empty());
  for (const char* backend : {"interpose", "cupti", "auto"}) {
    parse({{"GPUMEMTRACE_BACKEND", backend}, {"GPUMEMTRACE_DRIVER_STATS", "1"}});
    EXPECT_TRUE(g_warnings.empty()) << backend;
  }
}

TEST(Config, EachBadValueWarnsOnceAndKeepsTheDefault) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"GPUMEMTRACE_STACK_DEPTH", "-1"}, {"GPUMEMTRACE_STACK_DEPTH", "65"}, {"GPUMEMTRACE_STACK_DEPTH", "12x"},
      {"GPUMEMTRACE_ON_FULL", "block"},  {"GPUMEMTRACE_RING_EVENTS", "1000"}, {"GPUMEMTRACE_RING_EVENTS", "128"},
      {"GPUMEMTRACE_FLUSH_MS", "0"},     {"GPUMEMTRACE_FLUSH_MS", "1000"},    {"GPUMEMTRACE_DISABLE", "maybe"},
      {"GPUMEMTRACE_PYTHON", "maybe"},      {"GPUMEMTRACE_FREE_STACKS", "maybe"}, {"GPUMEMTRACE_BACKEND", "nvtx"},
      {"GPUMEMTRACE_DRIVER_STATS", "yes"},
      {"GPUMEMTRACE_OUTPUT", ""},        {"GPUMEMTRACE_UNWIND", "fp"},        {"GPUMEMTRACE_UNWIND", ""},
      {"GPUMEMTRACE_INTERN_STACKS", "maybe"},
      {"GPUMEMTRACE_MAX_BYTES", "10X"},  {"GPUMEMTRACE_MAX_BYTES", "1000"}, {"GPUMEMTRACE_MAX_BYTES", "-1G"},
      {"GPUMEMTRACE_MAX_BYTES", "99999999999T"}, {"GPUMEMTRACE_VERBOSE", "loud"}};
  const Config defaults = parse({});
  for (const auto& [name, value] : bad) {
    Config c = parse({{name, value}});
    ASSERT_EQ(g_warnings.size(), 1u) << name << "=" << value;
    EXPECT_NE(g_warnings[0].find(name), std::string::npos) << g_warnings[0];
    EXPECT_EQ(c.stack_depth, defaults.stack_depth);
    EXPECT_EQ(c.on_full, defaults.on_full);
    EXPECT_EQ(c.ring_events, defaults.ring_events);
    EXPECT_EQ(c.flush_ms, defaults.flush_ms);
    EXPECT_EQ(c.disabled, defaults.disabled);
    EXPECT_EQ(c.output, defaults.output);
    EXPECT_EQ(c.unwind, defaults.unwind);
    EXPECT_EQ(c.intern_stacks, defaults.intern_stacks);
    EXPECT_TRUE(c.max_bytes_default);
  }
}

TEST(Config, Verbosity) {
  EXPECT_EQ(parse({}).verbose, Verbosity::Auto);
  EXPECT_EQ(parse({{"GPUMEMTRACE_VERBOSE", "auto"}}).verbose, Verbosity::Auto);
  EXPECT_EQ(parse({{"GPUMEMTRACE_VERBOSE", "1"}}).verbose, Verbosity::On);
  EXPECT_EQ(parse({{"GPUMEMTRACE_VERBOSE", "off"}}).verbose, Verbosity::Off);
  EXPECT_TRUE(g_warnings.empty());
}

TEST(Config, BadValuesAreShownEscaped) {
  parse({{"GPUMEMTRACE_FLUSH_MS", "1\x1b[2J\n"}});
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_EQ(g_warnings[0], "ignoring GPUMEMTRACE_FLUSH_MS=1\\x1b[2J\\n (expected 1..100); using the default");
}

TEST(Config, MaxBytesTakesSizeSuffixes) {
  EXPECT_TRUE(parse({}).max_bytes_default);
  const std::vector<std::pair<std::string, uint64_t>> good = {
      {"64K", 64u << 10}, {"512m", 512ull << 20}, {"20G", 20ull << 30}, {"2GiB", 2ull << 30},
      {"1T", 1ull << 40}, {"100000", 100000}, {"0", 0}};
  for (const auto& [value, bytes] : good) {
    Config c = parse({{"GPUMEMTRACE_MAX_BYTES", value}});
    EXPECT_TRUE(g_warnings.empty()) << value;
    EXPECT_FALSE(c.max_bytes_default) << value;
    EXPECT_EQ(c.max_bytes, bytes) << value;
  }
}

TEST(Config, KeepTakesADurationOrASize) {
  Config off = parse({});
  EXPECT_EQ(off.keep_ns, 0u);
  EXPECT_EQ(off.keep_bytes, 0u);
  const std::vector<std::tuple<std::string, uint64_t, uint64_t>> good = {
      {"2h", 2 * 3600000000000ull, 0}, {"30min", 30 * 60000000000ull, 0}, {"1.5d", 129600000000000ull, 0},
      {"45s", 45000000000ull, 0}, {"0.25s", 250000000ull, 0}, {"500ms", 500000000ull, 0},
      {"20GiB", 0, 20ull << 30}, {"300K", 0, 300u << 10}, {"10m", 0, 10u << 20}};
  for (const auto& [value, ns, bytes] : good) {
    Config c = parse({{"GPUMEMTRACE_KEEP", value}});
    EXPECT_TRUE(g_warnings.empty()) << value;
    EXPECT_EQ(c.keep_ns, ns) << value;
    EXPECT_EQ(c.keep_bytes, bytes) << value;
  }
  // Too short to hold a window, too small for two segments, or not a duration or size at all.
  for (const char* bad : {"10ms", "64K", "2x", "h", "1.5.5s", "-2h", "", "99999999999999d"}) {
    Config c = parse({{"GPUMEMTRACE_KEEP", bad}});
    EXPECT_EQ(c.keep_ns + c.keep_bytes, 0u) << bad;
    ASSERT_EQ(g_warnings.size(), 1u) << bad;
    EXPECT_NE(g_warnings[0].find("GPUMEMTRACE_KEEP"), std::string::npos);
  }
}

TEST(Config, DefaultTraceCapIsATenthOfTheFreeSpaceClamped) {
  constexpr uint64_t kGiB = 1ull << 30;
  EXPECT_EQ(default_trace_cap(100 * kGiB, true), 10 * kGiB);
  EXPECT_EQ(default_trace_cap(2 * kGiB, true), kGiB);
  EXPECT_EQ(default_trace_cap(10000 * kGiB, true), 64 * kGiB);
  EXPECT_EQ(default_trace_cap(0, false), 8 * kGiB);
}

TEST(Config, OnlyALiteralOutputPathIsNamed) {
  EXPECT_FALSE(parse({}).output_named);  // the default name is generated
  EXPECT_TRUE(parse({{"GPUMEMTRACE_OUTPUT", "/dev/stdout"}}).output_named);
  EXPECT_TRUE(parse({{"GPUMEMTRACE_OUTPUT", "run.jsonl"}}).output_named);
  EXPECT_FALSE(parse({{"GPUMEMTRACE_OUTPUT", "/tmp/x/"}}).output_named);
  EXPECT_FALSE(parse({{"GPUMEMTRACE_OUTPUT", "/tmp/t.%p.jsonl"}}).output_named);
}

TEST(Config, NvtxMode) {
  g_warnings.clear();
  EXPECT_EQ(parse_nvtx_mode(nullptr, collect_warning), NvtxMode::Auto);
  EXPECT_EQ(parse_nvtx_mode("AUTO", collect_warning), NvtxMode::Auto);
  EXPECT_EQ(parse_nvtx_mode("1", collect_warning), NvtxMode::On);
  EXPECT_EQ(parse_nvtx_mode("off", collect_warning), NvtxMode::Off);
  EXPECT_TRUE(g_warnings.empty());
  EXPECT_EQ(parse_nvtx_mode("sometimes", collect_warning), NvtxMode::Auto);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("GPUMEMTRACE_NVTX=sometimes"), std::string::npos);
}

TEST(Config, OutputTemplate) {
  EXPECT_EQ(expand_output_path("gpumemtrace.%e.%p.jsonl", 42, "python3"), "gpumemtrace.python3.42.jsonl");
  EXPECT_EQ(expand_output_path("/out/", 7, "app"), "/out/gpumemtrace.app.7.jsonl.zst");
  EXPECT_EQ(expand_output_path("run-%p-100%%.jsonl.zst", 9, "x"), "run-9-100%.jsonl.zst");
  EXPECT_EQ(expand_output_path("odd%q%", 1, "x"), "odd%q%");
}

TEST(Config, EveryVariableTheParserReadsIsKnown) {
  static std::vector<std::string> asked;
  asked.clear();
  parse_config([](const char* name) -> const char* { return asked.push_back(name), nullptr; }, collect_warning);
  parse_nvtx_mode(nullptr, collect_warning);
  ASSERT_GE(asked.size(), 10u);
  for (const std::string& name : asked)
    EXPECT_NE(std::find(std::begin(kKnownVariables), std::end(kKnownVariables), name), std::end(kKnownVariables))
        << name;
}

std::vector<std::string> unknown_warnings(std::vector<const char*> env) {
  g_warnings.clear();
  env.push_back(nullptr);
  warn_unknown_variables(env.data(), collect_warning);
  return g_warnings;
}

TEST(Config, KnownAndForeignVariablesGetNoWarning) {
  std::vector<const char*> env = {"PATH=/usr/bin", "gpumemtrace_output=lower case is not ours", "GPUMEMTRACE=1",
                                  "XGPUMEMTRACE_FOO=1"};
  std::vector<std::string> entries;
  for (const char* known : kKnownVariables) entries.push_back(std::string(known) + "=1");
  for (const std::string& e : entries) env.push_back(e.c_str());
  EXPECT_EQ(unknown_warnings(env), std::vector<std::string>{});
  EXPECT_EQ(unknown_warnings({}), std::vector<std::string>{});
}

TEST(Config, UnknownVariableWarnsOnceInTheSameWordsWithTheClosestName) {
  const auto w = unknown_warnings({"GPUMEMTRACE_STACK_DEPHT=8", "GPUMEMTRACE_OUTPUT=x/", "GPUMEMTRACE_STACK_DEPHT=9",
                                   "GPUMEMTRACE_COLOUR=blue", "GPUMEMTRACE_QUITE=1", "GPUMEMTRACE_NO_VALUE"});
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0], "ignoring GPUMEMTRACE_STACK_DEPHT=8 (not a gpumemtrace variable; did you mean "
                  "GPUMEMTRACE_STACK_DEPTH?)");
  EXPECT_EQ(w[1], "ignoring GPUMEMTRACE_COLOUR=blue (not a gpumemtrace variable)");
  EXPECT_EQ(w[2], "ignoring GPUMEMTRACE_QUITE=1 (not a gpumemtrace variable; did you mean GPUMEMTRACE_QUIET?)");
  EXPECT_EQ(w[3], "ignoring GPUMEMTRACE_NO_VALUE= (not a gpumemtrace variable)");
}

TEST(Config, ClosestKnownVariableIsAtMostTwoEditsAway) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"GPUMEMTRACE_OUTPT", "GPUMEMTRACE_OUTPUT"},              // a deletion
      {"GPUMEMTRACE_BACKENDS", "GPUMEMTRACE_BACKEND"},          // an insertion
      {"GPUMEMTRACE_MAXBYTES", "GPUMEMTRACE_MAX_BYTES"},        // the underscore left out
      {"GPUMEMTRACE_FLUSH_SM", "GPUMEMTRACE_FLUSH_MS"},         // neighbours swapped
      {"GPUMEMTRACE_RING_EVENT", "GPUMEMTRACE_RING_EVENTS"},
      {"GPUMEMTRACE_SIM_DEVICE", "GPUMEMTRACE_SIM_DEVICES"},    // nearer than SIM_NO_DEVICE
  };
  for (const auto& [typo, expected] : cases) {
    const char* got = closest_known_variable(typo);
    EXPECT_STREQ(got ? got : "(none)", expected) << typo;
  }
  EXPECT_EQ(closest_known_variable("GPUMEMTRACE_"), nullptr);
  EXPECT_EQ(closest_known_variable("GPUMEMTRACE_TORCH_ENTRY"), nullptr);  // three edits from TORCH_ENTRIES
  EXPECT_EQ(closest_known_variable("GPUMEMTRACE_SYMBOLS"), nullptr);
}

}  // namespace
}  // namespace gpumemtrace
