// tests/unit/report_line_reader_test.cpp — the line reader's read-ahead thread: every line once, in
// order, across blocks; source errors and over-long lines after the lines before them; stopping
// early. Small chunks force many blocks, so the producer thread and the bounded queue are exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

#include "report/reader/compact_event.h"
#include "report/reader/line_reader.h"

using namespace gpumemtrace::report;

namespace {

// Hands out `text` a few bytes at a time, then throws once `fail_at` bytes were read (if set).
class TrickleSource : public ByteSource {
 public:
  explicit TrickleSource(std::string text, size_t step = 7, size_t fail_at = std::string::npos)
      : text_(std::move(text)), step_(step), fail_at_(fail_at) {}
  size_t read(char* out, size_t capacity) override {
    if (pos_ >= fail_at_) throw std::runtime_error("disk on fire");
    size_t n = std::min({capacity, step_, text_.size() - pos_});
    if (fail_at_ != std::string::npos) n = std::min(n, fail_at_ - pos_);
    text_.copy(out, n, pos_);
    pos_ += n;
    reads_.fetch_add(1);
    return n;
  }
  size_t reads() const { return reads_.load(); }

 private:
  std::string text_;
  size_t step_;
  size_t fail_at_;
  size_t pos_ = 0;
  std::atomic<size_t> reads_{0};
};

std::string numbered_lines(int count) {
  std::string text;
  for (int i = 1; i <= count; ++i) text += "line " + std::to_string(i) + std::string(static_cast<size_t>(i % 13), 'x') + "\n";
  return text;
}

}  // namespace

TEST(LineReaderAhead, EveryLineOnceInOrderAcrossManyBlocks) {
  const int count = 20000;
  TrickleSource source(numbered_lines(count) + "tail without newline", 1000);
  LineReader reader(source, 64);  // ~64-byte blocks: thousands of hand-overs through the queue
  Line line;
  for (int i = 1; i <= count; ++i) {
    ASSERT_TRUE(reader.next(line)) << i;
    ASSERT_EQ(line.text, "line " + std::to_string(i) + std::string(static_cast<size_t>(i % 13), 'x'));
    ASSERT_EQ(line.number, static_cast<uint64_t>(i));
    ASSERT_TRUE(line.terminated);
    // simdjson reads past the line: the padding must be there (ASan checks the access).
    volatile char past = line.text.data()[line.text.size() + kLinePadding - 1];
    (void)past;
  }
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "tail without newline");
  EXPECT_FALSE(line.terminated);
  EXPECT_FALSE(reader.next(line));
  EXPECT_FALSE(reader.next(line));  // stays at the end
}

TEST(LineReaderAhead, ALineLongerThanABlockGrowsIt) {
  const std::string longest(5000, 'L');
  TrickleSource source("a\n" + longest + "\nb\n", 100);
  LineReader reader(source, 32);
  Line line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "a");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, longest);
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line.text, "b");
  EXPECT_EQ(line.number, 3u);
  EXPECT_FALSE(reader.next(line));
}

TEST(LineReaderAhead, ASourceErrorComesAfterTheLinesBeforeIt) {
  const std::string text = numbered_lines(3000);
  const size_t fail_at = text.size() / 2;
  const size_t complete_lines = static_cast<size_t>(std::count(text.begin(), text.begin() + fail_at, '\n'));
  TrickleSource source(text, 50, fail_at);
  LineReader reader(source, 128);
  Line line;
  size_t seen = 0;
  try {
    while (reader.next(line)) ++seen;
    FAIL() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "disk on fire");
  }
  EXPECT_EQ(seen, complete_lines);
  EXPECT_FALSE(reader.next(line));
}

TEST(LineReaderAhead, TooLongALineAfterManyBlocksIsAnErrorAfterTheLinesBefore) {
  TrickleSource source(numbered_lines(500) + std::string(300, 'z') + "\nnever\n", 64);
  LineReader reader(source, 64, 200);
  Line line;
  int seen = 0;
  EXPECT_THROW(
      {
        while (reader.next(line)) ++seen;
      },
      std::runtime_error);
  EXPECT_EQ(seen, 500);
}

TEST(LineReaderAhead, StoppingEarlyDoesNotHangOrReadToTheEnd) {
  TrickleSource source(numbered_lines(100000), 4096);
  {
    LineReader reader(source, 256);
    Line line;
    ASSERT_TRUE(reader.next(line));
    ASSERT_TRUE(reader.next(line));
  }  // the producer is waiting for a free block: the destructor stops it
  // Bounded read-ahead: a few blocks, not the whole input.
  EXPECT_LT(source.reads(), 50u);
}

TEST(LineReaderAhead, AnEmptySourceHasNoLines) {
  TrickleSource source("");
  LineReader reader(source);
  Line line;
  EXPECT_FALSE(reader.next(line));
}

// Event lines scanned on the read-ahead thread: a common one (e, t, a, s, pool, segment) is handed over with the
// fields the caller's own scan gives; any other line (another key, another shape, not an event) is
// left for the caller.
TEST(LineReaderAhead, CommonEventLinesScannedAheadAreTheLinesOwnFields) {
  if (usable_cpus() == 1) GTEST_SKIP() << "one CPU: no read-ahead thread";
  namespace rd = gpumemtrace::report::reader;
  const int count = 5000;
  std::string text = "{\"v\":2,\"type\":\"header\"}\n";
  for (int i = 1; i <= count; ++i) {
    if (i % 7 == 0) text += "{\"e\": 1}\n";  // whitespace: not the recorder's shape
    else if (i % 11 == 0) text += "{\"type\":\"stack\",\"id\":" + std::to_string(i) + "}\n";
    else if (i % 13 == 0) text += "{\"e\":3,\"t\":-5}\n";  // a negative delta, no address or size
    else if (i % 17 == 0) text += "{\"e\":4,\"t\":1,\"a\":\"0x10\",\"pool\":\"default\",\"segment\":\"0x" + std::to_string(i) + "\"}\n";
    else text += "{\"e\":" + std::to_string(i % 50) + ",\"t\":" + std::to_string(i) + ",\"a\":\"0x" + std::to_string(i) +
                 "\",\"s\":" + std::to_string(i * 3) + (i % 5 == 0 ? ",\"label\":\"m" + std::to_string(i) + "\"" : "") + "}\n";
  }
  TrickleSource source(text, 4096);
  LineReader reader(source, 256, kMaxLineBytes, /*scan_events_ahead=*/true);
  Line line;
  size_t ahead = 0, events = 0;
  rd::Fields own, from_ahead;
  while (reader.next(line)) {
    const bool is_event = rd::scan_compact_event(line.text, own);
    if (is_event) ++events;
    if (!line.event) {
      // Left for the caller: not an event line, or one with another key.
      EXPECT_TRUE(!is_event || own.label.data() != nullptr || line.number <= 20) << line.text;
      continue;
    }
    ++ahead;
    ASSERT_TRUE(is_event) << line.text;
    rd::set_common_event(*line.event, from_ahead);
    EXPECT_EQ(from_ahead.present, own.present);
    EXPECT_EQ(from_ahead.site, own.site);
    EXPECT_EQ(from_ahead.t, own.t);
    EXPECT_EQ(from_ahead.t_negative, own.t_negative);
    EXPECT_EQ(from_ahead.short_addr, own.short_addr);
    EXPECT_EQ(from_ahead.short_size, own.short_size);
    EXPECT_EQ(from_ahead.segment, own.segment);
    EXPECT_EQ(from_ahead.pool, own.pool);
    EXPECT_EQ(from_ahead.pool.data(), own.pool.data());  // into the line's own bytes
    EXPECT_EQ(from_ahead.label.data(), nullptr);
  }
  // The first block is read on this thread; after it, every common event line is handed over.
  EXPECT_GT(events, size_t{count} / 2);
  EXPECT_GT(ahead, events * 3 / 5);
}
