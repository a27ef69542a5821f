// tests/unit/report_merge_test.cpp — unit tests of the reader's merge of delayed (PyTorch history)
// events into the live timeline by time, up to each `sync` (report/reader/event_merger.h,
// docs/trace-format.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <string>
#include <utility>
#include <vector>

#include "report/analyses/analyze.h"
#include "report/reader/event_merger.h"
#include "report/reader/trace_reader.h"

using namespace gpumemtrace::report;

namespace {

struct Collect : TraceHandler {
  std::vector<std::pair<uint64_t, uint64_t>> order;  // (seq, t) as handed on
  std::vector<std::string> apis;
  void on_event(const Event& e) override {
    order.emplace_back(e.seq, e.t);
    apis.emplace_back(e.api);
  }
  std::vector<uint64_t> seqs() const {
    std::vector<uint64_t> out;
    for (auto& p : order) out.push_back(p.first);
    return out;
  }
};

Event ev(uint64_t seq, uint64_t t, bool delayed = false, std::string_view api = "cudaMalloc") {
  Event e;
  e.seq = seq;
  e.t = t;
  e.op = Op::Alloc;
  e.kind = Kind::Device;
  e.delayed = delayed;
  e.api = api;
  return e;
}

const char* kHeader = R"({"type":"header","format":"gpumemtrace","version":1,"pid":7})";

std::string line(uint64_t seq, uint64_t t, const char* op, const char* extra = "") {
  return "{\"type\":\"event\",\"seq\":" + std::to_string(seq) + ",\"t\":" + std::to_string(t) +
         ",\"api\":\"x\",\"op\":\"" + op + "\",\"kind\":\"" +
         (std::string(op) == "sync" ? "none" : "device") + "\",\"addr\":\"0x" + std::to_string(seq) +
         "0\",\"size\":1,\"device\":0" + extra + "}\n";
}

}  // namespace

TEST(Merge, PassesThroughWithoutSync) {
  Collect out;
  EventMerger m(out);
  m.push(ev(1, 100));
  m.push(ev(2, 50, true));  // delayed but no sync yet: file order, nothing held
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(m.buffered(), 0u);
  m.finish();
  EXPECT_FALSE(m.merging());
  EXPECT_EQ(m.late(), 0u);
}

TEST(Merge, DelayedEventsGoWhereTheirTimeIs) {
  Collect out;
  EventMerger m(out);
  m.sync(10);                       // recording starts
  m.push(ev(1, 100));               // cudaMalloc of a segment
  m.push(ev(2, 300));               // cudaFree of it (empty_cache)
  m.push(ev(3, 400));
  EXPECT_EQ(m.buffered(), 3u);      // held until a sync covers them
  EXPECT_TRUE(out.order.empty());
  m.push(ev(4, 150, true, "torch.alloc"));          // the drain: blocks inside the segment
  m.push(ev(5, 250, true, "torch.free_requested"));
  m.sync(350);
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{1, 4, 5, 2}));
  EXPECT_EQ(out.apis[1], "torch.alloc");  // strings survive the holding
  EXPECT_EQ(m.buffered(), 1u);      // t 400 > 350: waits for the next sync or the end
  m.finish();
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{1, 4, 5, 2, 3}));
  EXPECT_EQ(m.max_held(), 5u);
  EXPECT_EQ(m.late(), 0u);
}

TEST(Merge, TiesPutLiveFirstAndLiveKeepsSeqOrder) {
  Collect out;
  EventMerger m(out);
  m.sync(1);
  m.push(ev(1, 200));
  m.push(ev(2, 199));               // another thread, a few ns behind: seq order stands
  m.push(ev(3, 200, true));
  m.push(ev(4, 100, true));         // delayed events are sorted by time among themselves
  m.push(ev(5, 100, true));
  m.sync(1000);
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{4, 5, 1, 2, 3}));
}

// A drain's entries come in time order and wait in a queue; one that comes out of order waits apart
// (a heap): the two together still hand on by (t, file order), across more than one ring's growth.
TEST(Merge, InOrderAndOutOfOrderDelayedEventsInterleave) {
  Collect out;
  EventMerger m(out);
  m.sync(1);
  uint64_t seq = 0;
  for (uint64_t i = 0; i < 300; ++i) {  // 300: the queue grows past its first size
    m.push(ev(++seq, 10 * i + 10, true));  // in order
    if (i % 7 == 3) m.push(ev(++seq, 10 * i + 5, true));  // out of order: before the one just queued
    if (i % 11 == 4) m.push(ev(++seq, 10 * i + 10, true));  // the same t: after it, by file order
    if (i % 13 == 5) m.push(ev(++seq, 10 * i, true));  // out of order, the t of one queued before it
  }
  m.finish();
  // Handed on by t, then seq (file order).
  std::vector<std::pair<uint64_t, uint64_t>> by_time;
  for (const auto& [s, t] : out.order) by_time.emplace_back(t, s);
  std::vector<std::pair<uint64_t, uint64_t>> sorted = by_time;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(by_time, sorted);
  EXPECT_EQ(out.order.size(), seq);
}

// The reader's interned API names (a version 2 site's) are not copied while held; any other text is.
TEST(Merge, StableApiNamesAreNotCopied) {
  Collect out;
  EventMerger m(out);
  m.sync(1);
  m.push(ev(1, 100, true, "torch.alloc"), /*stable_api=*/true);
  EXPECT_EQ(m.held_bytes(), sizeof(Event));
  m.push(ev(2, 200, true, "torch.free_requested"));
  EXPECT_EQ(m.held_bytes(), 2 * sizeof(Event) + std::string_view("torch.free_requested").size());
  m.finish();
  EXPECT_EQ(m.held_bytes(), 0u);
  EXPECT_EQ(out.apis, (std::vector<std::string>{"torch.alloc", "torch.free_requested"}));
}

TEST(Merge, LateDelayedEventIsCountedAndStillHandedOn) {
  Collect out;
  EventMerger m(out);
  m.sync(100);
  m.push(ev(1, 150));
  m.sync(200);
  m.push(ev(2, 120, true));         // a broken promise: older than the sync at 200
  m.push(ev(3, 250));
  m.sync(300);
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(m.late(), 1u);
}

TEST(Merge, BufferIsBounded) {
  Collect out;
  EventMerger m(out, 4);
  m.sync(1);
  for (uint64_t i = 1; i <= 10; ++i) m.push(ev(i, 100 + i));
  EXPECT_EQ(m.buffered(), 4u);
  EXPECT_EQ(m.forced(), 6u);
  m.finish();
  EXPECT_EQ(out.order.size(), 10u);
  EXPECT_EQ(out.seqs().front(), 1u);
}

TEST(Merge, SyncGoingBackDoesNotRelease) {
  Collect out;
  EventMerger m(out);
  m.sync(500);
  m.push(ev(1, 600));
  m.sync(400);
  EXPECT_TRUE(out.order.empty());
  m.finish();
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{1}));
}

TEST(Merge, ReaderMergesAndConsumesSyncLines) {
  std::string text = std::string(kHeader) + "\n" + line(1, 10, "sync") + line(2, 100, "alloc") +
                     line(3, 300, "free") + line(4, 150, "block_alloc", ",\"delayed\":true") +
                     line(5, 250, "sync") + line(6, 400, "alloc");
  auto source = memory_byte_source(text);
  SymbolTable symbols;
  Collect out;
  ReadResult r = read_trace(*source, "mem", symbols, out);
  // Up to the sync at 250: 2 (t 100), then the delayed 4 (t 150); 3 (t 300) waits for the end, with 6.
  EXPECT_EQ(out.seqs(), (std::vector<uint64_t>{2, 4, 3, 6}));
  EXPECT_EQ(r.events, 4u);  // sync lines are not memory events
  EXPECT_TRUE(r.warnings.empty());
}

TEST(Merge, ReaderRejectsANonBooleanDelayed) {
  std::string text = std::string(kHeader) + "\n" + line(1, 10, "alloc", ",\"delayed\":1");
  auto source = memory_byte_source(text);
  SymbolTable symbols;
  Collect out;
  EXPECT_THROW(read_trace(*source, "mem", symbols, out), TraceError);
}

TEST(Merge, AnalyzerSeesTheSegmentFreeAfterItsBlocks) {
  // A live cudaFree of a segment before the drain that delivers the frees of its blocks.
  std::string text =
      std::string(kHeader) + "\n" + line(1, 10, "sync") +
      "{\"type\":\"event\",\"seq\":2,\"t\":100,\"api\":\"cudaMalloc\",\"op\":\"alloc\",\"kind\":\"device\","
      "\"addr\":\"0x100000\",\"size\":4096,\"device\":0}\n"
      "{\"type\":\"event\",\"seq\":3,\"t\":300,\"api\":\"cudaFree\",\"op\":\"free\",\"kind\":\"device\","
      "\"addr\":\"0x100000\",\"size\":0,\"device\":0}\n"
      "{\"type\":\"event\",\"seq\":4,\"t\":150,\"api\":\"torch.alloc\",\"op\":\"block_alloc\",\"kind\":\"block\","
      "\"addr\":\"0x100000\",\"size\":1024,\"device\":0,\"segment\":\"0x100000\",\"delayed\":true}\n"
      "{\"type\":\"event\",\"seq\":5,\"t\":250,\"api\":\"torch.free_requested\",\"op\":\"block_free\","
      "\"kind\":\"block\",\"addr\":\"0x100000\",\"size\":1024,\"device\":0,\"delayed\":true}\n" +
      line(6, 260, "sync") + "{\"type\":\"footer\",\"events\":6}\n";
  auto source = memory_byte_source(text);
  ProcessReport r = analyze_source(*source, "mem", Suppressions());
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  EXPECT_EQ(r.leaked_bytes(), 0u);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].unmatched_frees, 0u);
  EXPECT_EQ(r.devices[0].peak_reserved, 4096u);
  EXPECT_EQ(r.devices[0].peak_allocated, 1024u);
}

namespace {

// Pushes `n` delayed events, times descending or ascending, after one sync; returns the seconds the
// pushes and the release took.
double merge_seconds(uint64_t n, bool descending) {
  struct Count : TraceHandler {
    uint64_t seen = 0, last_t = 0;
    bool sorted = true;
    void on_event(const Event& e) override {
      sorted = sorted && e.t >= last_t;
      last_t = e.t;
      ++seen;
    }
  } out;
  EventMerger m(out);
  m.sync(1);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) m.push(ev(i + 1, descending ? 10 + n - i : 10 + i, true, "torch.alloc"));
  m.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.seen, n);
  EXPECT_TRUE(out.sorted);
  return seconds;
}

}  // namespace

// A drain in reverse time order (gpumemtrace_record_torch entries with decreasing times) costs what a
// sorted one does, not quadratic time (issue 20: 160k events took 16.8 s). Measured as a ratio of two
// runs in the same process, so the machine's load cancels out; quadratic behaviour makes it
// thousands.
TEST(Merge, ReverseTimeOrderIsNotQuadratic) {
  const uint64_t n = 50000;
  merge_seconds(n / 10, false);  // warm up the allocator
  const double sorted = merge_seconds(n, false);
  const double reversed = merge_seconds(n, true);
  EXPECT_LT(reversed, 20 * sorted + 0.05) << "sorted " << sorted << " s, reversed " << reversed << " s";
}

TEST(Merge, HeldBytesAreBoundedAndStringsFreed) {
  Collect out;
  EventMerger m(out, EventMerger::kDefaultMaxBuffered, 64 * 1024);
  m.sync(1);
  std::vector<std::string> labels;
  for (int i = 0; i < 100; ++i) labels.push_back(std::string(4000, 'a') + std::to_string(i));
  for (uint64_t i = 0; i < labels.size(); ++i) {
    Event e = ev(i + 1, 100 + i);
    e.label = labels[i];
    m.push(e);
    EXPECT_LE(m.held_bytes(), 64u * 1024);
  }
  EXPECT_GT(m.forced(), 0u);
  m.finish();
  EXPECT_EQ(m.held_bytes(), 0u);
  EXPECT_EQ(out.order.size(), 100u);
}

TEST(Merge, SharedStringsOutliveTheFirstEventReleased) {
  Collect out;
  EventMerger m(out);
  m.sync(1);
  std::string api = "torch.free_requested";
  m.push(ev(1, 100, false, api));
  m.push(ev(2, 90, true, api));
  api.assign(api.size(), 'x');  // the caller's text is gone: the held copies must not be
  m.sync(95);                   // hands on 2 only: 1 still holds the shared copy
  m.finish();
  EXPECT_EQ(out.apis, (std::vector<std::string>{"torch.free_requested", "torch.free_requested"}));
}
