// report/allocator_model/settings.cpp — PYTORCH_CUDA_ALLOC_CONF syntax -> AllocatorSettings (see settings.h).
#include "report/allocator_model/settings.h"

#include <cstdlib>
#include <vector>

namespace gpumemtrace::report::allocator_model {

namespace {

// PyTorch's lexArgs: ',', ':', '[' and ']' are tokens of their own, spaces are dropped.
std::vector<std::string> lex(std::string_view conf) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : conf) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

size_t floor_log2(uint64_t v) { return 63 - static_cast<size_t>(__builtin_clzll(v)); }

class Parser {
 public:
  Parser(std::string_view conf, AllocatorSettings& s) : conf_(conf), tokens_(lex(conf)), s_(s) {}

  void run() {
    while (i_ < tokens_.size()) {
      const std::string key = next("a key");
      expect(":");
      if (key == "expandable_segments") {
        const std::string v = next("True or False");
        if (v != "True" && v != "False") fail(key + ": expected True or False, got `" + v + "`");
        s_.expandable_segments = v == "True";
      } else if (key == "max_split_size_mb") {
        // [A][B] parseMaxSplitSize: must be > kLargeBuffer (20 MiB).
        const uint64_t mb = number(key);
        if (mb <= 20) fail(key + " too small, must be > 20");
        s_.max_split_size = mb * kMiB;
      } else if (key == "max_non_split_rounding_mb") {
        s_.max_non_split_rounding = number(key) * kMiB;
      } else if (key == "garbage_collection_threshold") {
        const double t = fraction(key);
        if (!(t > 0.0 && t < 1.0)) fail(key + ": must be between 0.0 and 1.0 (exclusive)");
        s_.garbage_collection_threshold = t;
      } else if (key == "per_process_memory_fraction") {
        const double f = fraction(key);
        if (!(f > 0.0 && f <= 1.0)) fail(key + ": must be in (0.0, 1.0]");
        s_.memory_fraction = f;
      } else if (key == "roundup_power2_divisions") {
        roundup_divisions();
      } else if (key == "block_order") {
        const std::string v = next("stream_first or size_first");
        if (v != "stream_first" && v != "size_first") fail(key + ": expected stream_first or size_first");
        s_.order = v == "stream_first" ? BlockOrder::StreamFirst : BlockOrder::SizeFirst;
      } else if (key == "backend") {
        const std::string v = next("native");
        if (v != "native") fail("backend:" + v + " is not the caching allocator: nothing to replay");
      } else if (key == "release_lock_on_cudamalloc" || key.rfind("pinned_", 0) == 0 ||
                 key == "expandable_segments_handle_type" || key == "graph_capture_record_stream_reuse") {
        next("a value");  // no effect on which device memory is reserved
      } else {
        fail("unknown option `" + key + "`");
      }
      if (i_ < tokens_.size()) expect(",");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw SettingsError("`" + std::string(conf_) + "`: " + what);
  }
  std::string next(const char* what) {
    if (i_ >= tokens_.size()) fail(std::string("expected ") + what + " at the end");
    return tokens_[i_++];
  }
  void expect(const char* token) {
    const std::string t = next(token);
    if (t != token) fail(std::string("expected `") + token + "`, got `" + t + "`");
  }
  uint64_t number(const std::string& key) {
    const std::string v = next("a number");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || *end != '\0' || n > (kNoMaxSplit / kMiB)) fail(key + ": expected a number, got `" + v + "`");
    return n;
  }
  double fraction(const std::string& key) {
    const std::string v = next("a number");
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') fail(key + ": expected a number, got `" + v + "`");
    return d;
  }
  // [A][B] parseRoundUpPower2Divisions: a single power of two for every interval, or a list
  // [MB:N, ..., >:N] where MB (a power of two, in MiB) names an interval; the first entry also fills
  // the intervals below it, `>` fills those after the last named one.
  void roundup_divisions() {
    const std::string first = next("a number or [");
    if (first != "[") {
      --i_;
      const uint64_t n = number("roundup_power2_divisions");
      if (!is_power_of_two(n)) fail("roundup_power2_divisions: must be a power of 2, got " + std::to_string(n));
      s_.roundup_power2_divisions.fill(n);
      return;
    }
    bool first_value = true;
    size_t last_index = 0;
    while (true) {
      const std::string key = next("]");
      if (key == "]") break;
      expect(":");
      const uint64_t n = number("roundup_power2_divisions");
      if (n != 0 && !is_power_of_two(n)) fail("roundup_power2_divisions: must be a power of 2, got " + std::to_string(n));
      if (key == ">") {
        // The newest AllocatorConfig.cpp read fills from last_index + 1; older ones from last_index,
        // overwriting the last named interval (docs/what-if.md, "Releases").
        for (size_t j = first_value ? 0 : last_index + 1; j < kRoundUpIntervals; ++j) s_.roundup_power2_divisions[j] = n;
      } else {
        char* end = nullptr;
        const unsigned long long mb = std::strtoull(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || !is_power_of_two(mb)) {
          fail("roundup_power2_divisions: interval must be a power of 2 in MB, got `" + key + "`");
        }
        size_t index = std::min(floor_log2(mb), kRoundUpIntervals - 1);
        if (first_value) {
          for (size_t j = 0; j < index; ++j) s_.roundup_power2_divisions[j] = n;
          first_value = false;
        }
        s_.roundup_power2_divisions[index] = n;
        last_index = index;
      }
      const std::string sep = next("]");
      if (sep == "]") break;
      if (sep != ",") fail("roundup_power2_divisions: expected `,` or `]`, got `" + sep + "`");
    }
  }

  std::string_view conf_;
  std::vector<std::string> tokens_;
  AllocatorSettings& s_;
  size_t i_ = 0;
};

std::string number_text(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

AllocatorSettings parse_alloc_conf(std::string_view conf, AllocatorSettings base) {
  Parser(conf, base).run();
  return base;
}

std::string AllocatorSettings::describe() const {
  const AllocatorSettings defaults;
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  if (expandable_segments) add("expandable_segments:True");
  if (max_split_size != kNoMaxSplit) add("max_split_size_mb:" + std::to_string(max_split_size / kMiB));
  if (max_non_split_rounding != defaults.max_non_split_rounding) {
    add("max_non_split_rounding_mb:" + std::to_string(max_non_split_rounding / kMiB));
  }
  if (roundup_power2_divisions != defaults.roundup_power2_divisions) {
    bool uniform = true;
    for (uint64_t d : roundup_power2_divisions) uniform = uniform && d == roundup_power2_divisions[0];
    if (uniform) {
      add("roundup_power2_divisions:" + std::to_string(roundup_power2_divisions[0]));
    } else {
      std::string list;
      for (size_t i = 0; i < kRoundUpIntervals; ++i) {
        list += (i ? "," : "") + std::to_string(uint64_t{1} << i) + ":" + std::to_string(roundup_power2_divisions[i]);
      }
      add("roundup_power2_divisions:[" + list + "]");
    }
  }
  if (garbage_collection_threshold > 0) add("garbage_collection_threshold:" + number_text(garbage_collection_threshold));
  if (memory_fraction > 0) add("per_process_memory_fraction:" + number_text(memory_fraction));
  if (order != defaults.order) add(order == BlockOrder::StreamFirst ? "block_order:stream_first" : "block_order:size_first");
  return out;
}

}  // namespace gpumemtrace::report::allocator_model
