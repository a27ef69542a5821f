// tests/unit/recorder_label_table_test.cpp — interned scope names (interpose/recorder/label_table.h):
// one copy per distinct text, exact text kept, the same pointer from racing threads, null (not a
// crash, not a wrong name) once the table is full, and cuts at UTF-8 character boundaries.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "interpose/recorder/label_table.h"

namespace gpumemtrace {
namespace {

const char* intern(const std::string& s) { return intern_label(s.data(), s.size()); }

TEST(LabelTable, OneCopyPerDistinctText) {
  const std::string a = "tests/test_a.py::test_one[" + std::string(200, 'a') + "]";
  const std::string b = a.substr(0, a.size() - 1) + "b]";
  const char* first = intern(a);
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first, a.data());  // a copy, independent of the caller's buffer
  EXPECT_EQ(std::string(first), a);
  EXPECT_EQ(intern(a), first);
  const char* other = intern(b);
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, first);
  EXPECT_EQ(std::string(other), b);
}

TEST(LabelTable, PrefixIsADifferentName) {
  // Only the first `length` bytes count: a longer buffer interned by length is its prefix.
  const std::string name = std::string(100, 'p') + "suffix";
  const char* prefix = intern_label(name.data(), 100);
  ASSERT_NE(prefix, nullptr);
  EXPECT_EQ(std::string(prefix), std::string(100, 'p'));
  EXPECT_NE(intern(name), prefix);
}

TEST(LabelTable, RefusesTextAboveTheLimit) {
  const std::string too_long(kMaxScopeNameBytes + 1, 'x');
  EXPECT_EQ(intern(too_long), nullptr);
  const char* at_limit = intern(too_long.substr(1));
  ASSERT_NE(at_limit, nullptr);
  EXPECT_EQ(strlen(at_limit), kMaxScopeNameBytes);
}

TEST(LabelTable, RacingThreadsGetOnePointer) {
  constexpr int kThreads = 8, kNames = 200;
  std::vector<std::vector<const char*>> got(kThreads, std::vector<const char*>(kNames));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      while (!go.load()) {
      }
      for (int i = 0; i < kNames; ++i) got[t][i] = intern("race/" + std::string(60, 'r') + std::to_string(i));
    });
  go.store(true);
  for (auto& th : threads) th.join();
  for (int i = 0; i < kNames; ++i) {
    ASSERT_NE(got[0][i], nullptr);
    EXPECT_EQ(std::string(got[0][i]), "race/" + std::string(60, 'r') + std::to_string(i));
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(got[t][i], got[0][i]) << "name " << i;
  }
}

TEST(LabelTable, FullTableReturnsNullAndKeepsWhatItHas) {
  // Runs last in this file: it uses the process-wide table up. Names of ~200 bytes: the slots run
  // out before the 8 MiB arena does.
  const std::string kept = "kept/" + std::string(100, 'k');
  const char* before = intern(kept);
  ASSERT_NE(before, nullptr);
  size_t refused = 0;
  std::set<const char*> distinct;
  for (size_t i = 0; i < kLabelTableSlots + 1000; ++i) {
    const std::string name = "fill/" + std::to_string(i) + std::string(190, 'f');
    const char* p = intern(name);
    if (p == nullptr) {
      ++refused;
      continue;
    }
    ASSERT_EQ(std::string(p), name);
    distinct.insert(p);
  }
  EXPECT_GE(refused, 1000u);
  EXPECT_GT(distinct.size(), kLabelTableSlots / 2);
  EXPECT_EQ(intern(kept), before);  // still found
}

TEST(Utf8Cut, NeverEndsInsideACharacter) {
  const std::string s = "ab\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a b é € 😀
  EXPECT_EQ(utf8_cut(s.data(), 2), 2u);
  EXPECT_EQ(utf8_cut(s.data(), 3), 2u);   // inside é
  EXPECT_EQ(utf8_cut(s.data(), 4), 4u);
  EXPECT_EQ(utf8_cut(s.data(), 5), 4u);   // inside €
  EXPECT_EQ(utf8_cut(s.data(), 6), 4u);
  EXPECT_EQ(utf8_cut(s.data(), 7), 7u);
  EXPECT_EQ(utf8_cut(s.data(), 10), 7u);  // inside 😀
  EXPECT_EQ(utf8_cut(s.data(), 11), 11u);
  EXPECT_EQ(utf8_cut("\x80\x80", 2), 2u);  // no lead byte at all: left as it is
}

}  // namespace
}  // namespace gpumemtrace
