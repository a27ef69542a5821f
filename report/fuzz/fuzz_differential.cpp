// report/fuzz/fuzz_differential.cpp — libFuzzer target: gpumem-report on a mutated trace must give
// the same report as on the trace's canonical re-encoding, or reject it (differential.h).
//
// Seeds are real traces (tests/report/real, the simulator's; tests/report/fuzz_seeds.py cuts them to
// small valid windows). Besides libFuzzer's byte mutations, a custom mutator makes the changes a
// strict JSON parser and a fast one are most likely to read differently: keys and strings with
// \u escapes, duplicated keys, whitespace between tokens, members reordered, numbers at the format's
// edges (2^53, 2^64, negative zero, fractions), unknown fields with valid and invalid JSON values,
// strings past the reader's length limit, raw control and non-UTF-8 bytes, lines duplicated, dropped
// and swapped.
//
// Bounds per input, asserted by libFuzzer's options (tests/report/test_report_fuzz_differential.py,
// report/module.mk): -timeout (seconds per input) and -rss_limit_mb / -malloc_limit_mb (memory).
// A finding prints what differs and aborts, so libFuzzer saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "report/fuzz/differential.h"

using gpumemtrace::report::fuzz::differential_finding;

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

// One member of a line's top-level object: where its key (quotes included) and value lie.
struct Member {
  size_t key_begin, key_end, value_begin, value_end;
};

// The end of the JSON string starting at text[at] (a '"'), one past its closing quote; npos if none.
size_t string_end(const std::string& text, size_t at) {
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (text[i] == '\\') ++i;
    else if (text[i] == '"') return i + 1;
  }
  return std::string::npos;
}

// The end of the value starting at text[at]: a string, or anything up to the ',' or '}' that closes
// it at nesting depth 0.
size_t value_end(const std::string& text, size_t at) {
  if (at < text.size() && text[at] == '"') return string_end(text, at);
  int depth = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      i = string_end(text, i);
      if (i == std::string::npos) return i;
      --i;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return i;
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return text.size();
}

// The members of `line` read loosely (no whitespace handling beyond skipping it): enough to aim the
// mutations; an odd line gives fewer.
std::vector<Member> members(const std::string& line) {
  std::vector<Member> out;
  size_t i = line.find('{');
  if (i == std::string::npos) return out;
  ++i;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == ',' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] != '"') break;
    Member m;
    m.key_begin = i;
    m.key_end = string_end(line, i);
    if (m.key_end == std::string::npos) break;
    size_t colon = line.find(':', m.key_end);
    if (colon == std::string::npos) break;
    m.value_begin = colon + 1;
    while (m.value_begin < line.size() && line[m.value_begin] == ' ') ++m.value_begin;
    m.value_end = value_end(line, m.value_begin);
    if (m.value_end == std::string::npos || m.value_end <= m.value_begin) break;
    out.push_back(m);
    i = m.value_end;
  }
  return out;
}

const char* const kNumbers[] = {"0", "-0", "1", "-1", "2", "9007199254740991", "9007199254740992", "4294967295",
                                "4294967296", "2147483647", "2147483648", "-2147483649", "18446744073709551615",
                                "18446744073709551616", "-9223372036854775808", "1.0", "1e3", "0.5", "01",
                                "123456789012345678901234567890", "1E400", "-"};
const char* const kValues[] = {"true", "false", "null", "tru", "nul", "\"\\q\"", "\"\\ud800\"", "\"\\u0000\"",
                               "[1,{\"a\":\"\\u00e9\"}]", "{\"\\u0074ype\":1}", "{}", "[]", "\"x\"", "1e400",
                               "123456789012345678901234567890", "[1,]", "{\"a\":1,}", "\"\\u0041\"", "-0.0"};
const char* const kKeys[] = {"s", "t", "e", "q", "a", "r", "size", "type", "op", "kind", "api", "label", "pool",
                             "device", "frames", "stack", "id", "seq", "free", "total", "function", "cmdline",
                             "inlined", "delayed", "range", "segment", "handle", "size_exact", "device_exact",
                             "zz"};

std::string escaped_char(unsigned char c, std::mt19937_64& rng) {
  char text[8];
  std::snprintf(text, sizeof text, rng() % 2 ? "\\u%04x" : "\\u%04X", c);
  return text;
}

// One structure-aware change to `text`; false when it found nothing to change.
bool mutate(std::string& text, std::mt19937_64& rng) {
  std::vector<size_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' && i + 1 < text.size()) starts.push_back(i + 1);
  const size_t which = rng() % starts.size();
  const size_t line_begin = starts[which];
  size_t line_end = text.find('\n', line_begin);
  if (line_end == std::string::npos) line_end = text.size();
  std::string line = text.substr(line_begin, line_end - line_begin);
  const std::vector<Member> ms = members(line);
  auto pick = [&]() -> const Member* { return ms.empty() ? nullptr : &ms[rng() % ms.size()]; };
  switch (rng() % 14) {
    case 0: {  // a key character as a \u escape
      const Member* m = pick();
      if (!m || m->key_end - m->key_begin < 3) return false;
      const size_t at = m->key_begin + 1 + rng() % (m->key_end - m->key_begin - 2);
      if (line[at] == '\\') return false;
      line.replace(at, 1, escaped_char(static_cast<unsigned char>(line[at]), rng));
      break;
    }
    case 1: {  // a string value's character as a \u escape
      const Member* m = pick();
      if (!m || line[m->value_begin] != '"' || m->value_end - m->value_begin < 3) return false;
      const size_t at = m->value_begin + 1 + rng() % (m->value_end - m->value_begin - 2);
      if (line[at] == '\\') return false;
      line.replace(at, 1, escaped_char(static_cast<unsigned char>(line[at]), rng));
      break;
    }
    case 2: {  // a member repeated, with its value or another one
      const Member* m = pick();
      if (!m) return false;
      std::string value = rng() % 2 ? line.substr(m->value_begin, m->value_end - m->value_begin)
                                    : std::string(kNumbers[rng() % (sizeof kNumbers / sizeof *kNumbers)]);
      const std::string member = line.substr(m->key_begin, m->key_end - m->key_begin) + ":" + value;
      const size_t at = rng() % 2 ? m->key_begin : m->value_end;
      line.insert(at, rng() % 2 || at == m->key_begin ? member + "," : "," + member);
      break;
    }
    case 3: {  // whitespace between tokens
      const Member* m = pick();
      if (!m) return false;
      const char* spaces[] = {" ", "\t", "  ", "\r", " \t "};
      const size_t at = rng() % 2 ? m->value_begin : m->key_end;
      line.insert(at, spaces[rng() % 5]);
      break;
    }
    case 4: {  // a number at an edge
      const Member* m = pick();
      if (!m) return false;
      line.replace(m->value_begin, m->value_end - m->value_begin, kNumbers[rng() % (sizeof kNumbers / sizeof *kNumbers)]);
      break;
    }
    case 5: {  // two members swapped
      if (ms.size() < 2) return false;
      size_t i = rng() % ms.size(), j = rng() % ms.size();
      if (i == j) return false;
      if (i > j) std::swap(i, j);
      const std::string a = line.substr(ms[i].key_begin, ms[i].value_end - ms[i].key_begin);
      const std::string b = line.substr(ms[j].key_begin, ms[j].value_end - ms[j].key_begin);
      line.replace(ms[j].key_begin, b.size(), a);
      line.replace(ms[i].key_begin, a.size(), b);
      break;
    }
    case 6: {  // an unknown (or known) key with an odd value
      const Member* m = pick();
      if (!m) return false;
      const std::string key = kKeys[rng() % (sizeof kKeys / sizeof *kKeys)];
      const std::string value = rng() % 2 ? kValues[rng() % (sizeof kValues / sizeof *kValues)]
                                          : kNumbers[rng() % (sizeof kNumbers / sizeof *kNumbers)];
      line.insert(m->value_end, ",\"" + key + "\":" + value);
      break;
    }
    case 7: {  // a string past the reader's limit, ASCII or multi-byte
      const Member* m = pick();
      if (!m) return false;
      const size_t n = 4000 + rng() % 300;
      std::string value = "\"";
      const char* piece = rng() % 2 ? "ab" : "\xc3\xa9\xe2\x82\xac";
      while (value.size() < n) value += piece;
      value += '"';
      line.replace(m->value_begin, m->value_end - m->value_begin, value);
      break;
    }
    case 8: {  // a raw control or non-UTF-8 byte inside a string
      const Member* m = pick();
      if (!m || line[m->value_begin] != '"') return false;
      const char bytes[] = {'\x01', '\x1b', '\x7f', '\xff', '\xc2', '\x80'};
      line.insert(m->value_begin + 1, 1, bytes[rng() % sizeof bytes]);
      break;
    }
    case 9: {  // a line repeated
      text.insert(line_begin, line + "\n");
      return true;
    }
    case 10: {  // a line dropped
      if (starts.size() < 2) return false;
      text.erase(line_begin, std::min(text.size(), line_end + 1) - line_begin);
      return true;
    }
    case 11: {  // a line swapped with the next
      if (which + 1 >= starts.size()) return false;
      size_t next_end = text.find('\n', line_end + 1);
      if (next_end == std::string::npos) return false;
      const std::string next = text.substr(line_end + 1, next_end - line_end - 1);
      text.replace(line_begin, next_end - line_begin, next + "\n" + line);
      return true;
    }
    case 12: {  // a key replaced by another
      const Member* m = pick();
      if (!m) return false;
      line.replace(m->key_begin, m->key_end - m->key_begin, "\"" + std::string(kKeys[rng() % (sizeof kKeys / sizeof *kKeys)]) + "\"");
      break;
    }
    default: {  // blank lines, or the last line cut short
      if (rng() % 2) {
        text.insert(line_begin, rng() % 2 ? "\n" : " \r\n");
      } else {
        text.resize(line_begin + (line_end - line_begin) / 2);
      }
      return true;
    }
  }
  text.replace(line_begin, line_end - line_begin, line);
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  if (rng() % 4 == 0 || size == 0) return LLVMFuzzerMutate(data, size, max_size);
  std::string text(reinterpret_cast<const char*>(data), size);
  for (int tries = 0, changes = 1 + static_cast<int>(rng() % 3); tries < 8 && changes > 0; ++tries)
    if (mutate(text, rng)) --changes;
  if (text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string finding = differential_finding(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!finding.empty()) {
    std::fprintf(stderr, "gpumem-report differential finding: %s\n", finding.c_str());
    std::abort();
  }
  return 0;
}
