// tests/unit/report_compact_event_test.cpp — the version 2 event line scanner (compact_event.h) against
// the simdjson parser (line_parser.h): a line the scanner takes gives the fields simdjson gives, and the
// scanner refuses what simdjson would refuse or read otherwise (hex addresses of every length and case,
// a digit cut by the line's end, bytes that are not digits on either side of '9', 'f', 'F').
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "report/reader/compact_event.h"
#include "report/reader/line_parser.h"

using namespace gpumemtrace::report;
using namespace gpumemtrace::report::reader;

namespace {

// The line in a buffer followed by kLinePadding bytes of `pad` (the padding may hold anything: the
// next line's text, zeros).
struct Padded {
  Padded(const std::string& text, char pad) : buffer(text + std::string(kLinePadding, pad)) {
    line.text = std::string_view(buffer.data(), text.size());
    line.number = 1;
    line.terminated = true;
  }
  std::string buffer;
  Line line;
};

// What a reading gives: the event fields, and the pool's text (a Fields view into the line, which
// is gone once the reading returns).
struct Read {
  Fields f;
  std::string pool;
};

// Whether simdjson reads the line, and the event fields it gives.
bool parsed(simdjson::ondemand::parser& parser, const std::string& text, Read& r) {
  Padded p(text, '\0');
  try {
    parse_line(parser, p.line, r.f, 2);
    r.pool = std::string(r.f.pool);
    return true;
  } catch (const LineError&) {
    return false;
  }
}

void expect_same(const Read& ra, const Read& rb, const std::string& text) {
  const Fields& a = ra.f;
  const Fields& b = rb.f;
  EXPECT_EQ(a.site, b.site) << text;
  EXPECT_EQ(a.t, b.t) << text;
  EXPECT_EQ(a.t_negative, b.t_negative) << text;
  EXPECT_EQ(a.short_addr, b.short_addr) << text;
  EXPECT_EQ(a.short_size, b.short_size) << text;
  EXPECT_EQ(a.segment, b.segment) << text;
  EXPECT_EQ(a.handle, b.handle) << text;
  EXPECT_EQ(a.stream, b.stream) << text;
  EXPECT_EQ(ra.pool, rb.pool) << text;
  EXPECT_EQ(a.has(Fields::kSegment), b.has(Fields::kSegment)) << text;
}

// Scans `text` with each padding byte that could continue a value; returns whether it was taken.
bool scanned(const std::string& text, Read& r) {
  bool taken = false;
  for (char pad : {'\0', '0', '9', 'f', 'F', '"', '}'}) {
    Padded p(text, pad);
    const bool ok = scan_compact_event(p.line.text, r.f);
    r.pool = std::string(r.f.pool);
    if (pad != '\0') {
      EXPECT_EQ(ok, taken) << "the padding changed the answer: " << text;
    }
    taken = ok;
  }
  return taken;
}

TEST(CompactEvent, HexOfEveryLengthAndCaseAsSimdjsonReadsIt) {
  simdjson::ondemand::parser parser;
  const std::string digits = "0123456789abcdefABCDEF";
  std::mt19937_64 rng(7);
  int taken = 0;
  for (size_t length = 0; length <= 18; ++length) {
    for (int round = 0; round < 40; ++round) {
      std::string hex;
      for (size_t i = 0; i < length; ++i) hex += digits[rng() % digits.size()];
      for (const std::string& text : {"{\"e\":3,\"t\":5,\"a\":\"0x" + hex + "\",\"s\":256}",
                                      "{\"e\":3,\"t\":5,\"segment\":\"0x" + hex + "\"}"}) {
        Read scan, json;
        const bool ok = scanned(text, scan);
        // 1 to 16 digits are an address; none or more than 16 are refused by both.
        EXPECT_EQ(ok, length >= 1 && length <= 16) << text;
        if (!ok) continue;
        ++taken;
        ASSERT_TRUE(parsed(parser, text, json)) << text;
        expect_same(scan, json, text);
      }
    }
  }
  EXPECT_EQ(taken, 16 * 40 * 2);
}

TEST(CompactEvent, BytesBesideTheHexDigitsAreNotDigits) {
  // The neighbours of each digit range, and bytes with the high bit set whose low 7 bits are digits.
  for (char c : {'/', ':', '`', 'g', '@', 'G', 'x', ' ', '\x80', '\xb0', '\xe1', '\xc6'}) {
    for (size_t at = 0; at < 14; ++at) {
      std::string hex = "7000011a0c00ab";
      hex[at] = c;
      const std::string text = "{\"e\":3,\"t\":5,\"a\":\"0x" + hex + "\",\"s\":256}";
      Read r;
      EXPECT_FALSE(scanned(text, r)) << text;
    }
  }
}

TEST(CompactEvent, AValueCutByTheEndOfTheLineIsRefused) {
  // The line ends inside the digits: the padding that follows (digits here) is not read as more.
  const std::string whole = "{\"e\":3,\"t\":5,\"a\":\"0x7000011a0c00";
  for (size_t cut = 17; cut <= whole.size(); ++cut) {
    Read r;
    EXPECT_FALSE(scanned(whole.substr(0, cut), r)) << whole.substr(0, cut);
  }
}

TEST(CompactEvent, RecordedShapesAsSimdjsonReadsThem) {
  simdjson::ondemand::parser parser;
  const std::vector<std::string> lines = {
      "{\"e\":30,\"t\":280,\"a\":\"0x7000011a0c00\",\"s\":64512}",
      "{\"e\":15,\"t\":1000,\"a\":\"0x700000100000\",\"s\":397312,\"segment\":\"0x700000000000\"}",
      "{\"e\":8,\"t\":1242,\"a\":\"0x700203300000\",\"s\":262144,\"pool\":\"default\",\"segment\":\"0x700000000000\"}",
      "{\"e\":9,\"t\":-12,\"a\":\"0xFFFFFFFFFFFFFFFF\",\"q\":3,\"r\":-2}",
      "{\"e\":1,\"t\":0,\"a\":\"0x0\",\"handle\":\"0xAbC\",\"stream\":\"0x1\"}",
  };
  for (const std::string& text : lines) {
    Read scan, json;
    ASSERT_TRUE(scanned(text, scan)) << text;
    ASSERT_TRUE(parsed(parser, text, json)) << text;
    expect_same(scan, json, text);
  }
}

}  // namespace
