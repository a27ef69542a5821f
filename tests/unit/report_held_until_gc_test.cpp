// tests/unit/report_held_until_gc_test.cpp — a scope's memory that a later garbage collection freed
// ("gc" records) is held until garbage collection, not the scope's leak: exact for frees the recorder
// saw (inside the window, on its thread), within 100 us for PyTorch's (report/analyses/held_until_gc.h);
// and the reader's rules for the record.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "report/analyses/analyze.h"
#include "report/analyses/held_until_gc.h"
#include "report/reader/records.h"

using namespace gpumemtrace::report;

namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kTid = 7;

// A version 1 trace: a test's scope on thread kTid allocates `size` at 0x1000 (api `api`, an
// allocation or a PyTorch block) and ends at t=300 without freeing it; then `after` (more lines).
std::string scope_leaving(uint64_t size, const std::string& after, bool torch = false) {
  const std::string alloc = torch ? R"("op":"block_alloc","kind":"block","api":"torch.alloc","segment":"0x1000")"
                                  : R"("op":"alloc","kind":"device","api":"cudaMalloc")";
  return std::string(R"({"type":"header","format":"gpumemtrace","version":1,"pid":7})") + "\n" +
         R"({"type":"event","seq":1,"t":100,"tid":7,"op":"scope_begin","kind":"none","api":"pytest","label":"t.py::test_a","device":-1})" + "\n" +
         R"({"type":"event","seq":2,"t":200,"tid":7,)" + alloc + R"(,"addr":"0x1000","size":)" + std::to_string(size) + R"(,"device":0})" + "\n" +
         R"({"type":"event","seq":3,"t":300,"tid":7,"op":"scope_end","kind":"none","api":"pytest","label":"t.py::test_a","device":-1})" + "\n" +
         after + R"({"type":"footer"})" + "\n";
}

std::string free_at(uint64_t seq, uint64_t t, uint64_t tid, bool torch = false) {
  const std::string what = torch ? R"("op":"block_free","kind":"block","api":"torch.free_requested","delayed":true)"
                                 : R"("op":"free","kind":"device","api":"cudaFree")";
  return R"({"type":"event","seq":)" + std::to_string(seq) + R"(,"t":)" + std::to_string(t) + R"(,"tid":)" +
         std::to_string(tid) + "," + what + R"(,"addr":"0x1000","device":0})" + "\n";
}

std::string gc_window(uint64_t seq, uint64_t begin, uint64_t end, uint64_t tid = kTid) {
  return R"({"type":"gc","seq":)" + std::to_string(seq) + R"(,"t":)" + std::to_string(begin) + R"(,"end_time":)" +
         std::to_string(end) + R"(,"tid":)" + std::to_string(tid) + "}\n";
}

ScopeReport only_scope(const std::string& text) {
  auto source = memory_byte_source(text);
  ProcessReport r = analyze_source(*source, "mem", Suppressions());
  EXPECT_EQ(r.scopes.size(), 1u);
  return r.scopes.empty() ? ScopeReport() : r.scopes[0];
}

void expect_held(const ScopeReport& s, uint64_t bytes) {
  EXPECT_EQ(s.leaked_bytes, 0u);
  EXPECT_EQ(s.leaked_count, 0u);
  EXPECT_TRUE(s.leaks.empty());
  EXPECT_EQ(s.held_until_gc_bytes, bytes);
  EXPECT_EQ(s.held_until_gc_count, 1u);
  ASSERT_EQ(s.held_until_gc.size(), 1u);
  EXPECT_EQ(s.held_until_gc[0].bytes, bytes);
}

void expect_leak(const ScopeReport& s, uint64_t bytes) {
  EXPECT_EQ(s.leaked_bytes, bytes);
  EXPECT_EQ(s.leaked_count, 1u);
  EXPECT_EQ(s.leaks.size(), 1u);
  EXPECT_EQ(s.held_until_gc_bytes, 0u);
  EXPECT_TRUE(s.held_until_gc.empty());
}

}  // namespace

TEST(HeldUntilGc, AFreeInsideACollectionOnItsThreadIsNoLeak) {
  // The collection's record comes after the free inside it (it is written when the collection ends).
  expect_held(only_scope(scope_leaving(4 * MiB, free_at(4, 1500, kTid) + gc_window(5, 1000, 2000))), 4 * MiB);
  // Its edges count: the recorder's times and the window's are read from one clock.
  expect_held(only_scope(scope_leaving(MiB, free_at(4, 1000, kTid) + gc_window(5, 1000, 2000))), MiB);
  expect_held(only_scope(scope_leaving(MiB, free_at(4, 2000, kTid) + gc_window(5, 1000, 2000))), MiB);
}

TEST(HeldUntilGc, AFreeOutsideTheWindowOrOnAnotherThreadStaysALeak) {
  expect_leak(only_scope(scope_leaving(MiB, free_at(4, 999, kTid) + gc_window(5, 1000, 2000))), MiB);
  expect_leak(only_scope(scope_leaving(MiB, gc_window(4, 1000, 2000) + free_at(5, 2001, kTid))), MiB);
  expect_leak(only_scope(scope_leaving(MiB, free_at(4, 1500, kTid + 1) + gc_window(5, 1000, 2000))), MiB);
  // Never freed: a leak, whatever the collections.
  expect_leak(only_scope(scope_leaving(MiB, gc_window(4, 1000, 2000))), MiB);
  // No collection on record (an older plugin, or no pytest): as before.
  expect_leak(only_scope(scope_leaving(MiB, free_at(4, 1500, kTid))), MiB);
}

TEST(HeldUntilGc, PyTorchsFreesMatchWithinTheirClockSlack) {
  // PyTorch's frees come from its history: their time converted from whole microseconds, their thread
  // the drain's. Within 100 us of the window, on any thread: held; further: a leak.
  const uint64_t slack = 100'000;
  expect_held(only_scope(scope_leaving(MiB, gc_window(4, 1000, 2000) + free_at(5, 1500, 99, true), true)), MiB);
  expect_held(only_scope(scope_leaving(MiB, gc_window(4, 1000, 2000) + free_at(5, 2000 + slack, 99, true), true)), MiB);
  expect_held(only_scope(scope_leaving(MiB, gc_window(4, slack + 1000, slack + 2000) + free_at(5, 1000, 99, true), true)),
              MiB);
  expect_leak(only_scope(scope_leaving(MiB, gc_window(4, 1000, 2000) + free_at(5, 2001 + slack, 99, true), true)), MiB);
}

TEST(HeldUntilGc, AmongManyCollectionsTheOneAroundTheFreeCounts) {
  std::string after;
  uint64_t seq = 4;
  for (uint64_t w = 0; w < 50; ++w) after += gc_window(seq++, 10'000 + w * 1000, 10'000 + w * 1000 + 100);
  // Between two windows: a leak; inside the 31st: held.
  expect_leak(only_scope(scope_leaving(MiB, after + free_at(seq, 10'000 + 30 * 1000 + 500, kTid))), MiB);
  expect_held(only_scope(scope_leaving(MiB, free_at(4, 10'000 + 30 * 1000 + 50, kTid) + gc_window(5, 40'000, 40'100))),
              MiB);
}

TEST(HeldUntilGc, AFailedTestIsStillNotChecked) {
  std::string text = scope_leaving(MiB, free_at(4, 1500, kTid) + gc_window(5, 1000, 2000));
  const std::string end = R"("op":"scope_end",)";
  text.insert(text.find(end) + end.size(), R"("result":1,)");
  const ScopeReport s = only_scope(text);
  EXPECT_TRUE(s.failed);
  EXPECT_EQ(s.leaked_bytes, 0u);
  EXPECT_EQ(s.held_until_gc_bytes, 0u);
}

TEST(HeldUntilGc, ReaderRefusesAMalformedRecord) {
  // The error the reader gives for the trace, "" when it reads it.
  auto error = [](const std::string& after) -> std::string {
    const std::string text = scope_leaving(MiB, after);
    auto source = memory_byte_source(text);
    try {
      analyze_source(*source, "mem", Suppressions());
    } catch (const TraceError& e) {
      return e.message();
    }
    return "";
  };
  EXPECT_EQ(error(gc_window(4, 2000, 1000)), "gc record ends (end_time) before it begins (t)");
  EXPECT_EQ(error(gc_window(3, 1000, 2000)), "gc seq 3 does not increase (previous 3)");
  EXPECT_EQ(error(R"({"type":"gc","t":1000,"end_time":2000,"tid":7})" "\n"), "gc record without \"seq\"");
  EXPECT_EQ(error(R"({"type":"capped","seq":4,"t":400,"size":10,"max_bytes":10})" "\n" + gc_window(5, 1000, 2000)),
            "gc record after the capped record");
  EXPECT_EQ(error(gc_window(4, 1000, 1000)), "");  // an instant
}

// Memory stays bounded: past its limits the analysis checks no further leaks and reads no further
// collections, says so, and what it did not check stays a leak.
TEST(HeldUntilGc, LimitsAreWarnedAbout) {
  HeldUntilGc gc(/*max_candidates=*/2, /*max_windows=*/1);
  auto holding = [](uint64_t addr) {
    Holding h;
    h.level = Level::Allocation;
    h.key = addr;
    h.size = 64;
    h.site = 1;
    return h;
  };
  for (uint64_t addr : {0x1000, 0x2000, 0x3000}) gc.note_leak(holding(addr), 0);
  Event window;
  window.op = Op::Gc;
  window.tid = 5;
  for (uint64_t begin : {100, 300}) {
    window.t = begin;
    window.end_time = begin + 100;
    gc.on_window(window);
  }
  Event free;
  free.tid = 5;
  for (auto [addr, t] : {std::pair<uint64_t, uint64_t>{0x1000, 150}, {0x2000, 350}, {0x3000, 150}}) {
    free.t = t;
    gc.at(free);
    gc.on_release(holding(addr));
  }
  std::vector<uint64_t> held;
  std::vector<std::string> warnings;
  gc.finish([&](uint32_t, SiteId, uint64_t size) { held.push_back(size); }, warnings);
  EXPECT_EQ(held, std::vector<uint64_t>{64});  // 0x1000 only: 0x2000's window was not kept, 0x3000 not noted
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0], "1 leaks of scopes past the first 2 were not checked against garbage collections (limit)");
  EXPECT_EQ(warnings[1], "1 garbage collections past the first 1 were not read (limit): what they freed counts as leaked");
}
