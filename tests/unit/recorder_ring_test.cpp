// tests/unit/recorder_ring_test.cpp — the MPSC ring under many producer threads: no loss, no
// duplicate, total order (sequence numbers are consecutive in pop order), per-producer FIFO.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "interpose/recorder/ring.h"

namespace gpumemtrace {
namespace {

struct Item {
  uint64_t seq;
  uint32_t producer;
  uint64_t index;
};

TEST(Ring, RejectsCapacityThatIsNotAPowerOfTwo) {
  Ring<Item> ring;
  EXPECT_FALSE(ring.init(1000));
  EXPECT_FALSE(ring.init(1));
  EXPECT_TRUE(ring.init(1024));
}

TEST(Ring, FullRingRefusesAndConsumingMakesRoom) {
  Ring<Item> ring;
  ASSERT_TRUE(ring.init(4));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.try_push([&](Item& it, uint64_t s) { it.seq = s; }));
  EXPECT_FALSE(ring.try_push([](Item&, uint64_t) { FAIL() << "filled a slot of a full ring"; }));
  ASSERT_NE(ring.peek(), nullptr);
  EXPECT_EQ(ring.peek()->seq, 1u);
  ring.pop();
  EXPECT_TRUE(ring.try_push([&](Item& it, uint64_t s) { it.seq = s; }));
  for (uint64_t want = 2; want <= 5; ++want) {
    ASSERT_NE(ring.peek(), nullptr);
    EXPECT_EQ(ring.peek()->seq, want);
    ring.pop();
  }
  EXPECT_EQ(ring.peek(), nullptr);
}

TEST(Ring, ResetForgetsEverythingAndRestartsSequences) {
  Ring<Item> ring;
  ASSERT_TRUE(ring.init(8));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring.try_push([](Item& it, uint64_t s) { it.seq = s; }));
  ring.reset();
  EXPECT_EQ(ring.peek(), nullptr);
  ASSERT_TRUE(ring.try_push([](Item& it, uint64_t s) { it.seq = s; }));
  EXPECT_EQ(ring.peek()->seq, 1u);
}

void run_producers(int producers, uint64_t per_producer, size_t capacity) {
  Ring<Item> ring;
  ASSERT_TRUE(ring.init(capacity));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < per_producer; ++i) {
        while (!ring.try_push([&](Item& it, uint64_t s) {
          it.seq = s;
          it.producer = static_cast<uint32_t>(p);
          it.index = i;
        }))
          std::this_thread::yield();  // full: wait for the consumer, as the recorder's default does
      }
    });
  }
  go = true;
  std::vector<uint64_t> next_index(producers, 0);
  const uint64_t total = per_producer * producers;
  uint64_t expected_seq = 1;
  while (expected_seq <= total) {
    const Item* it = ring.peek();
    if (!it) {
      std::this_thread::yield();
      continue;
    }
    // Total order: sequence numbers come out consecutive, no gap, no duplicate.
    ASSERT_EQ(it->seq, expected_seq);
    // Per-producer FIFO: each thread's events come out in the order it pushed them (no loss).
    ASSERT_LT(it->producer, static_cast<uint32_t>(producers));
    ASSERT_EQ(it->index, next_index[it->producer]);
    ++next_index[it->producer];
    ring.pop();
    ++expected_seq;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ring.peek(), nullptr);
  for (int p = 0; p < producers; ++p) EXPECT_EQ(next_index[p], per_producer);
}

TEST(Ring, OneProducer) { run_producers(1, 200000, 1024); }
TEST(Ring, EightProducersSmallRing) { run_producers(8, 50000, 64); }
TEST(Ring, ThirtyTwoProducers) { run_producers(32, 10000, 4096); }

}  // namespace
}  // namespace gpumemtrace
