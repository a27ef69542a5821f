// tests/unit/recorder_line_queue_test.cpp — the writer thread's waiting warning lines
// (interpose/recorder/line_queue.h): printed oldest first, once each; a flood beyond the slots is
// counted and the count printed after the waiting lines; nothing lost or printed twice while a
// producer and consumers race.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "interpose/recorder/line_queue.h"

namespace gpumemtrace {
namespace {

// What print() wrote, one string per write (a write is one whole line).
std::mutex g_written_mutex;
std::vector<std::string> g_written;

void collect(const char* text, size_t size) {
  std::lock_guard<std::mutex> lock(g_written_mutex);
  g_written.emplace_back(text, size);
}

std::vector<std::string> print_all(LineQueue& q) {
  g_written.clear();
  q.print(collect);
  return g_written;
}

TEST(LineQueue, PrintsWaitingLinesOnceOldestFirst) {
  auto q = std::make_unique<LineQueue>();
  EXPECT_FALSE(q->waiting());
  q->push("first");
  q->push("second");
  EXPECT_TRUE(q->waiting());
  EXPECT_EQ(print_all(*q), (std::vector<std::string>{"gpumemtrace: first\n", "gpumemtrace: second\n"}));
  EXPECT_FALSE(q->waiting());
  EXPECT_TRUE(print_all(*q).empty());
}

TEST(LineQueue, LongLineIsCutToOneLine) {
  auto q = std::make_unique<LineQueue>();
  q->push(std::string(2 * kLineBytes, 'x').c_str());
  const std::vector<std::string> out = print_all(*q);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), kLineBytes);
  EXPECT_EQ(out[0].back(), '\n');
}

TEST(LineQueue, FloodIsCountedAndTheCountPrintedAfterTheWaitingLines) {
  auto q = std::make_unique<LineQueue>();
  constexpr int kPushed = 40;
  for (int i = 0; i < kPushed; ++i) q->push(("warning " + std::to_string(i)).c_str());
  const std::vector<std::string> out = print_all(*q);
  ASSERT_EQ(out.size(), LineQueue::kSlots + 1);
  for (uint32_t i = 0; i < LineQueue::kSlots; ++i) EXPECT_EQ(out[i], "gpumemtrace: warning " + std::to_string(i) + "\n");
  EXPECT_EQ(out.back(),
            "gpumemtrace: 24 more warnings were dropped (the writer thread's queue of lines for stderr was full)\n");
  // Reported once; the queue takes lines again.
  EXPECT_TRUE(print_all(*q).empty());
  q->push("after");
  EXPECT_EQ(print_all(*q), std::vector<std::string>{"gpumemtrace: after\n"});
}

TEST(LineQueue, OneDroppedLineIsSingular) {
  auto q = std::make_unique<LineQueue>();
  for (uint32_t i = 0; i <= LineQueue::kSlots; ++i) q->push("w");
  const std::vector<std::string> out = print_all(*q);
  ASSERT_EQ(out.size(), LineQueue::kSlots + 1);
  EXPECT_EQ(out.back().rfind("gpumemtrace: 1 more warning was dropped (", 0), 0u) << out.back();
}

TEST(LineQueue, ForgetClearsLinesAndCount) {
  auto q = std::make_unique<LineQueue>();
  for (uint32_t i = 0; i < 2 * LineQueue::kSlots; ++i) q->push("w");
  q->forget();
  EXPECT_FALSE(q->waiting());
  EXPECT_TRUE(print_all(*q).empty());
}

// A producer floods while two consumers print: every line is printed once or counted as dropped.
TEST(LineQueue, RacingProducerAndConsumersAccountForEveryLine) {
  auto q = std::make_unique<LineQueue>();
  g_written.clear();
  constexpr int kPushed = 20000;
  std::atomic<bool> done{false};
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c)
    consumers.emplace_back([&] {
      while (!done.load()) q->print(collect);
    });
  std::thread producer([&] {
    for (int i = 0; i < kPushed; ++i) q->push(("line " + std::to_string(i)).c_str());
  });
  producer.join();
  done.store(true);
  for (auto& t : consumers) t.join();
  q->print(collect);

  long printed = 0, dropped = 0, last = -1;
  for (const std::string& w : g_written) {
    if (w.rfind("gpumemtrace: line ", 0) == 0) {
      const long i = std::stol(w.substr(18));
      EXPECT_GT(i, last) << "printed out of order or twice";
      last = i;
      ++printed;
    } else {
      ASSERT_EQ(w.rfind("gpumemtrace: ", 0), 0u) << w;
      const long n = std::stol(w.substr(13));
      EXPECT_GT(n, 0);
      EXPECT_NE(w.find(n == 1 ? " more warning was dropped" : " more warnings were dropped"), std::string::npos) << w;
      dropped += n;
    }
  }
  EXPECT_EQ(printed + dropped, kPushed);
  EXPECT_GE(printed, static_cast<long>(LineQueue::kSlots));
}

}  // namespace
}  // namespace gpumemtrace
