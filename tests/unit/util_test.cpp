// tests/unit/util_test.cpp — unit tests of the shared helpers in util/: byte sizes, suffixes, the clock,
// the nearest name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/byte_size.h"
#include "util/edit_distance.h"
#include "util/ends_with.h"
#include "util/monotonic_clock.h"

using gpumemtrace::util::ends_with;
using gpumemtrace::util::parse_byte_size;

TEST(ByteSize, ParsesUnitsInAnyCaseAsPowersOf1024) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("10K"), 10240u);
  EXPECT_EQ(parse_byte_size("64k"), 64u << 10);
  EXPECT_EQ(parse_byte_size("512m"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("2G"), 2147483648u);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("2gib"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_byte_size("3KB"), 3u << 10);
  EXPECT_EQ(parse_byte_size("7B"), 7u);
}

TEST(ByteSize, FractionsRoundToTheNearestByte) {
  EXPECT_EQ(parse_byte_size("1.5MiB"), 1572864u);
  EXPECT_EQ(parse_byte_size(".5K"), 512u);
  EXPECT_EQ(parse_byte_size("2."), 2u);
  EXPECT_EQ(parse_byte_size("0.1K"), 102u);      // 102.4
  EXPECT_EQ(parse_byte_size("1.0009765625K"), 1025u);
  EXPECT_EQ(parse_byte_size("1.5"), 2u);
  EXPECT_EQ(parse_byte_size("0.333333333333333333333333G"), 357913941u);  // digits past the 18th dropped
}

TEST(ByteSize, RejectsAnythingElse) {
  for (const char* text : {"", "lots", "-1", "-1G", "+1", "10X", "10iB", "1e3", " 1", "1 ", "1.2.3", ".", "K",
                           "0x10", "1KK", "1GB5"}) {
    EXPECT_FALSE(parse_byte_size(text)) << text;
  }
}

TEST(ByteSize, RejectsCountsPast64Bits) {
  EXPECT_EQ(parse_byte_size("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(parse_byte_size("18446744073709551616"));
  EXPECT_FALSE(parse_byte_size("99999999999T"));
  EXPECT_EQ(parse_byte_size("16777215T"), 16777215ull << 40);
  EXPECT_FALSE(parse_byte_size("16777216T"));
  EXPECT_FALSE(parse_byte_size("16777215.9999999999999999999T"));  // the fraction carries it past the top
}

TEST(NearestName, WithinTheEditsAllowedAndFirstOfEquals) {
  using gpumemtrace::util::edit_distance;
  using gpumemtrace::util::nearest_name;
  EXPECT_EQ(edit_distance("--fail-on-leak", "--fail-on-laek", 5), 1u);  // neighbours swapped: one edit
  EXPECT_EQ(edit_distance("--top", "--format", 2), 3u);                 // past the cap: cap + 1
  const std::vector<std::string> options = {"--format", "--frames", "--fail-on-leak", "--fail-on-growth"};
  const std::string* got = nearest_name("--fromat", options, 2);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, "--format");
  got = nearest_name("--fail-on-lek", options, 2);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, "--fail-on-leak");
  EXPECT_EQ(nearest_name("--width", options, 2), nullptr);
  const char* const commands[] = {"run", "ci"};
  const char* const* command = nearest_name("rnu", commands, 1);
  ASSERT_NE(command, nullptr);
  EXPECT_STREQ(*command, "run");
  EXPECT_EQ(nearest_name("xyz", commands, 1), nullptr);
}

TEST(EndsWith, ComparesTheTail) {
  EXPECT_TRUE(ends_with("trace.jsonl.zst", ".zst"));
  EXPECT_TRUE(ends_with(std::string("a.py"), ".py"));
  EXPECT_TRUE(ends_with(".zst", ".zst"));
  EXPECT_TRUE(ends_with("x", ""));
  EXPECT_FALSE(ends_with("trace.jsonl", ".zst"));
  EXPECT_FALSE(ends_with("st", ".zst"));
  EXPECT_FALSE(ends_with("", "a"));
  static_assert(ends_with("a.pkl", ".pkl"), "usable in constant expressions");
}

TEST(MonotonicClock, NeverGoesBackAndMatchesClockGettime) {
  const uint64_t before = gpumemtrace::util::monotonic_ns();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t direct = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  const uint64_t after = gpumemtrace::util::monotonic_ns();
  EXPECT_LE(before, direct);
  EXPECT_LE(direct, after);
  EXPECT_GT(gpumemtrace::util::clock_ns(CLOCK_REALTIME), 1600000000ull * 1000000000ull);  // after 2020
}
